"""What project-api needs from the machine it runs on: where its C runtime and templates are
installed, which optional extras are present, and how a child process is stopped."""
