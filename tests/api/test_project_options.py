"""Every option-checking rule of project_api.api.project, without any server."""

from __future__ import annotations

import pytest

from project_api.api.project import (
    add_unspecified_options,
    check_options,
    parse_option_assignments,
    parse_option_value,
)
from project_api.errors import OptionError, ProjectError

# Shaped exactly like server_info_query's project_options (spec §1.7: 7 keys).
OPTIONS = [
    {"name": "project_type", "choices": ["host_driven", "standalone"], "default": None,
     "type": "str", "required": ["generate_project"], "optional": None, "help": "What to make."},
    {"name": "verbose", "choices": None, "default": False, "type": "bool", "required": None,
     "optional": ["build"], "help": "Verbose build."},
    {"name": "workspace_size_bytes", "choices": None, "default": 2097152, "type": "int",
     "required": None, "optional": ["generate_project"], "help": "Pool size."},
    {"name": "serial_number", "choices": None, "default": None, "type": "str",
     "required": ["flash", "open_transport"], "optional": None, "help": "Which board."},
]


def test_defaults_are_filled():
    full = check_options({"project_type": "standalone"}, OPTIONS, "generate_project")
    assert full == {"project_type": "standalone", "verbose": False,
                    "workspace_size_bytes": 2097152, "serial_number": None}


def test_add_unspecified_options_mutates_and_returns():
    given = {"verbose": True}
    assert add_unspecified_options(given, OPTIONS) is given
    assert given["verbose"] is True and given["workspace_size_bytes"] == 2097152
    fresh = add_unspecified_options(None, OPTIONS)
    assert fresh == {"project_type": None, "verbose": False, "workspace_size_bytes": 2097152,
                     "serial_number": None}


def test_unknown_option_lists_valid_names_and_suggests_closest():
    with pytest.raises(OptionError) as info:
        check_options({"workspace_size": 10}, OPTIONS, "generate_project", " for template 'host'")
    msg = str(info.value)
    assert "unknown option 'workspace_size' for template 'host'" in msg
    assert "did you mean 'workspace_size_bytes'?" in msg
    assert "valid options: project_type, serial_number, verbose, workspace_size_bytes" in msg


def test_unknown_option_without_close_match_has_no_suggestion():
    with pytest.raises(OptionError) as info:
        check_options({"zzz": 1}, OPTIONS)
    assert "did you mean" not in str(info.value)
    assert "valid options:" in str(info.value)


def test_required_option_missing_names_option_and_method():
    with pytest.raises(OptionError, match=r"option 'project_type' is required by generate_project"
                                          r".*-o project_type=<value> \(one of: host_driven, standalone\)"):
        check_options({}, OPTIONS, "generate_project")
    with pytest.raises(OptionError, match="option 'serial_number' is required by flash"):
        check_options({"project_type": "standalone"}, OPTIONS, "flash")


def test_required_only_for_its_methods():
    # project_type is required for generate_project, not for build or flash.
    assert check_options({"serial_number": "x"}, OPTIONS, "build")["project_type"] is None
    assert check_options({"serial_number": "x"}, OPTIONS, "flash")["serial_number"] == "x"
    # Without a method, required options are not enforced (values are still checked).
    check_options({}, OPTIONS, None)


def test_explicit_none_counts_as_missing_for_required():
    with pytest.raises(OptionError, match="required by open_transport"):
        check_options({"serial_number": None}, OPTIONS, "open_transport")


@pytest.mark.parametrize(
    "name, value",
    [
        ("verbose", "true"),  # a string is not a bool
        ("verbose", 1),  # nor is an int
        ("workspace_size_bytes", True),  # a bool is not an int here
        ("workspace_size_bytes", "1024"),
        ("workspace_size_bytes", 1.5),
        ("project_type", 3),
    ],
)
def test_wrong_type_is_rejected(name, value):
    opts = {"project_type": "standalone", name: value}
    with pytest.raises(OptionError, match=f"option '{name}' expects"):
        check_options(opts, OPTIONS, "generate_project")


@pytest.mark.parametrize("name, value", [("verbose", True), ("verbose", False),
                                         ("workspace_size_bytes", 0), ("workspace_size_bytes", 1 << 40),
                                         ("serial_number", "")])
def test_right_type_is_accepted(name, value):
    full = check_options({"project_type": "host_driven", name: value}, OPTIONS, "generate_project")
    assert full[name] == value and type(full[name]) is type(value)


def test_choices_are_enforced():
    with pytest.raises(OptionError, match=r"'project_type' = 'aot' is not one of its choices: "
                                          r"host_driven, standalone"):
        check_options({"project_type": "aot"}, OPTIONS, "generate_project")


def test_option_error_is_a_project_error_and_value_error():
    with pytest.raises(ProjectError):
        check_options({"nope": 1}, OPTIONS)
    with pytest.raises(ValueError):
        check_options({"nope": 1}, OPTIONS)


def test_unknown_type_string_is_not_checked_but_choices_are():
    opts = [{"name": "x", "type": "float", "choices": [0.5, 1.5], "default": 0.5,
             "required": None, "optional": ["build"], "help": ""}]
    assert check_options({"x": 1.5}, opts, "build") == {"x": 1.5}
    with pytest.raises(OptionError, match="not one of its choices"):
        check_options({"x": 2.5}, opts, "build")


@pytest.mark.parametrize("text, value", [("true", True), ("True", True), ("1", True), ("yes", True),
                                         ("on", True), ("false", False), ("0", False),
                                         ("no", False), ("OFF", False)])
def test_parse_bool(text, value):
    assert parse_option_value(OPTIONS[1], text) is value


def test_parse_int_and_str():
    assert parse_option_value(OPTIONS[2], "4096") == 4096
    assert parse_option_value(OPTIONS[2], "0x1000") == 4096
    assert parse_option_value(OPTIONS[0], "standalone") == "standalone"
    assert parse_option_value(OPTIONS[0], "a=b") == "a=b"
    with pytest.raises(OptionError, match="expects an integer, got '4k'"):
        parse_option_value(OPTIONS[2], "4k")
    with pytest.raises(OptionError, match="expects a bool, got 'maybe'; use true or false"):
        parse_option_value(OPTIONS[1], "maybe")


def test_parse_assignments():
    got = parse_option_assignments(["verbose=true", "workspace_size_bytes=8", "project_type=a=b"],
                                   OPTIONS)
    assert got == {"verbose": True, "workspace_size_bytes": 8, "project_type": "a=b"}
    with pytest.raises(OptionError, match="is not NAME=VALUE"):
        parse_option_assignments(["verbose"], OPTIONS)
    with pytest.raises(OptionError, match="did you mean 'verbose'"):
        parse_option_assignments(["verbos=1"], OPTIONS)
