"""The Project API wire: the server base that template servers subclass, the client that
launches and drives them, the JSON-RPC transport between the two, and the project (a generated
folder with its server) that the tools work on."""
