"""Project types as data: what each kind of firmware a template generates is made of.

A template declares its types once, in ``PROJECT_TYPES``; the base class, the ``project_type``
option, the generated sources and the client's early refusals all read that table::

    PROJECT_TYPES = {
        "host_driven": ProjectType(sources=("src/main.c", "src/platform.c"), crt="host_driven",
                                   link="rpc", help="an RPC server the host drives",
                                   banner=b"project-api stm32 ready"),
        "standalone": ProjectType(sources=("src/standalone_main.c",), crt="standalone",
                                  link=None, model="ai_api", help="the ai_ API ..."),
    }
    OPTIONS = [project_type_option(PROJECT_TYPES), ...]

A type's ``link`` is the protocol its firmware speaks to the host (:data:`LINKS`), or None for a
firmware that has none: ``open_transport`` refuses such a project at once, and so does our
client before it starts a server (``server_info_query`` carries the table, :func:`to_wire`).
The receive ring of a device UART follows one rule for every template
(:meth:`ProjectType.rx_ring_bytes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from project_api.template.options import DeclaredOption, option

#: The protocols a device link speaks, as :attr:`ProjectType.link` names them.
LINKS = ("rpc", "mlperftiny")
#: What a project type's model C is: the model glue (``model_glue.c``), the glue plus the
#: MLPerf Tiny model file, or the ai_ API over the glue of every model of the firmware.
MODEL_KINDS = ("glue", "mlperftiny", "ai_api")
#: The smallest UART receive ring: an MLPerf Tiny command (80 bytes) and any console input fit.
MIN_RX_RING_BYTES = 1024
#: Framing bytes around an RPC packet on the wire (escapes aside): start, length, CRC, slack.
RPC_FRAMING_BYTES = 64


@dataclass(frozen=True)
class ProjectType:
    """One kind of firmware a template generates."""

    #: The template's own files this type compiles, relative to the template (copied as they are).
    sources: tuple[str, ...]
    #: Its project in the C runtime's manifest (``crt/libraries.txt``).
    crt: str
    #: The protocol its firmware speaks to the host (one of :data:`LINKS`), or None: no link.
    link: str | None
    #: One clause for the ``project_type`` option's help ("an RPC server the host drives").
    help: str
    #: The start of the line the firmware prints when it is ready (an emulator waits for it).
    banner: bytes | None = None
    #: The model's C (one of :data:`MODEL_KINDS`).
    model: str = "glue"

    def __post_init__(self) -> None:
        if self.link is not None and self.link not in LINKS:
            raise ValueError(f"ProjectType link {self.link!r}: want one of {', '.join(LINKS)} "
                             "or None")
        if self.model not in MODEL_KINDS:
            raise ValueError(f"ProjectType model {self.model!r}: want one of "
                             f"{', '.join(MODEL_KINDS)}")

    def rx_ring_bytes(self, max_packet_size_bytes: int) -> int:
        """The device's UART receive ring, a power of two: it holds what the host sends before
        it waits for an answer. Over an RPC link that is one whole packet with its framing;
        over any other (an MLPerf Tiny command line, the ai_ API's console) a short line."""
        if self.link == "rpc":
            return max(MIN_RX_RING_BYTES,
                       1 << (max_packet_size_bytes + RPC_FRAMING_BYTES).bit_length())
        return MIN_RX_RING_BYTES


def project_type_option(types: Mapping[str, ProjectType]) -> DeclaredOption:
    """The ``project_type`` option of a template with these types: their names as its choices,
    the first as its default, and each type's help in its help text."""
    if not types:
        raise ValueError("project_type_option: a template declares at least one project type")
    text = "; ".join(f"{name}: {kind.help}" for name, kind in types.items())
    return option("project_type", "str", choices=list(types), default=next(iter(types)),
                  optional=["generate_project"], help=f"{text}.")


def to_wire(types: Mapping[str, ProjectType]) -> dict[str, dict[str, Any]]:
    """The table as ``server_info_query`` carries it: ``{name: {"link": ...}}``."""
    return {name: {"link": link} for name, link in links_of(types).items()}


#: How messages name the protocol of each link.
LINK_TITLES = {"rpc": "the RPC protocol", "mlperftiny": "the MLPerf Tiny benchmark protocol"}


def links_of(types: Mapping[str, ProjectType]) -> dict[str, str | None]:
    """``{project type: its link}``, as :func:`to_wire` carries it to the client."""
    return {name: kind.link for name, kind in types.items()}


def speaks(link: str | None) -> str:
    """What a firmware with ``link`` speaks, as messages say it."""
    return (f"its firmware speaks {LINK_TITLES[link]}" if link is not None
            else "its firmware has no link to the host")


def type_with_link(links: Mapping[str, str | None], link: str | None = None) -> str | None:
    """The first project type whose link is ``link`` (None: whose link is any link)."""
    return next((name for name, has in links.items()
                 if has is not None and (link is None or has == link)), None)


def no_link(where: str, name: str, types: Mapping[str, ProjectType]) -> str:
    """The one line refusing a verb that needs a link on ``where``, a project of type ``name``
    whose firmware has none, with the type to generate instead."""
    links = links_of(types)
    other = type_with_link(links, "rpc") or type_with_link(links)
    fix = f"; generate the project again with -o project_type={other}" if other else ""
    return f"{where} is a {name} project (project_type={name}): {speaks(None)}{fix}"
