"""A V1 repository's ``config.yaml``: read into JSON-compatible values, and written back as icechunk writes it.

icechunk serialises its configuration with serde_yaml, which writes a value of an enum that carries data
as a YAML tag: a virtual chunk container's store (``!s3 {...}``, ``!local_file_system /dir``) and the
manifest splitting and preload conditions (``!name_matches {regex: ...}``, ``!Axis 0``,
``!DimensionName time``, ``!or [...]``). It refuses such a value written as a plain map. Read here, a tag
becomes a map of one key (``{"Axis": "0"}``); written, the places icechunk's schema holds such an enum get
their tags back (a plain map there would not open).
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable

from zsarchive.errors import ZSCorrupt


@functools.cache
def _loader() -> type:
    """A SafeLoader that turns icechunk's custom tags (``!local_file_system /dir``) into ``{tag: value}``
    and refuses aliases: icechunk writes none, and a few nested ones expand to billions of nodes. Built
    on first use: only V1 repositories have a config.yaml, and importing yaml is slow."""
    import yaml

    class ConfigLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(
                    f"an alias at line {mark.line + 1}, column {mark.column + 1} (aliases are not accepted)"
                )
            return super().compose_node(parent, index)

    def tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {suffix: value}

    ConfigLoader.add_multi_constructor("!", tagged)
    return ConfigLoader


def load_config(raw: bytes, name: str) -> Any:
    """The values of a ``config.yaml`` (``name`` in errors); ZSCorrupt, one line, if it is not YAML."""
    import yaml

    try:
        return yaml.load(raw, Loader=_loader())
    except RecursionError:
        raise ZSCorrupt(f"{name}: nested too deeply") from None
    except yaml.YAMLError as exc:
        raise ZSCorrupt(f"{name}: not valid YAML ({exc})") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more digits than Python converts
        raise ZSCorrupt(f"{name}: a value out of range ({exc})") from None


class _Tagged(dict):
    """A map of one key that serde_yaml writes as the tag ``!key`` on the value; ``number``: the value is
    a number (an axis), written plain."""

    number = False


class _Number(_Tagged):
    number = True


def _tagged(value: Any, kind: type[_Tagged] = _Tagged, inner: Callable[[Any], Any] | None = None) -> Any:
    """``value`` marked to be written as a tag where it is a map of one key (anything else as it is)."""
    if not (isinstance(value, dict) and len(value) == 1):
        return value
    ((tag, content),) = value.items()
    return kind({tag: inner(content) if inner is not None else content})


def _condition(value: Any) -> Any:
    """A splitting or preload condition: ``!or`` and ``!and`` hold conditions in turn."""
    if (
        isinstance(value, dict)
        and len(value) == 1
        and next(iter(value)) in ("or", "and")
        and isinstance(next(iter(value.values())), list)
    ):
        return _tagged(value, inner=lambda items: [_condition(item) for item in items])
    return _tagged(value)


def _dim_condition(value: Any) -> Any:
    """A splitting dimension condition: ``!Axis 0`` (a number), ``!DimensionName time`` or ``Any``."""
    return _tagged(value, _Number if isinstance(value, dict) and "Axis" in value else _Tagged)


def _mark(config: dict) -> None:
    """Mark, in place, each value icechunk's configuration schema holds as a tagged enum."""

    def items(value: Any) -> list:
        return value if isinstance(value, list) else []

    def mapping(value: Any) -> dict:
        return value if isinstance(value, dict) else {}

    containers = config.get("virtual_chunk_containers")
    for container in containers.values() if isinstance(containers, dict) else ():
        if isinstance(container, dict) and "store" in container:
            container["store"] = _tagged(container["store"])
    manifest = mapping(config.get("manifest"))
    splitting = mapping(manifest.get("splitting"))
    for rule in items(splitting.get("split_sizes")):
        if isinstance(rule, list) and len(rule) == 2:
            rule[0] = _condition(rule[0])
            for dim in items(rule[1]):
                if isinstance(dim, dict) and "condition" in dim:
                    dim["condition"] = _dim_condition(dim["condition"])
    preload = mapping(manifest.get("preload"))
    if "preload_if" in preload:
        preload["preload_if"] = _condition(preload["preload_if"])


@functools.cache
def _dumper() -> type:
    import yaml

    class ConfigDumper(yaml.SafeDumper):
        def choose_scalar_style(self):
            if self.event.style == "" and self.event.tag and self.event.tag.startswith("!"):
                return ""  # a tagged scalar marked plain below
            return super().choose_scalar_style()

    def represent(dumper: yaml.SafeDumper, value: _Tagged):
        ((tag, inner),) = value.items()
        if isinstance(inner, dict):
            return dumper.represent_mapping("!" + tag, inner)
        if isinstance(inner, list):
            return dumper.represent_sequence("!" + tag, inner)
        text = str(inner)
        # plain where serde_yaml writes it plain: a number, or a text that reads back as text
        plain = value.number or not yaml.safe_dump(text).startswith(("'", '"'))
        return dumper.represent_scalar("!" + tag, text, style="" if plain and text else None)

    ConfigDumper.add_representer(_Tagged, represent)
    ConfigDumper.add_representer(_Number, represent)
    return ConfigDumper


def dump_config(config: Any) -> bytes:
    """``config.yaml`` of a V1 repository holding ``config`` (as :func:`load_config` reads it)."""
    import yaml

    config = json.loads(json.dumps(config))
    if isinstance(config, dict):
        _mark(config)
    return yaml.dump(config, Dumper=_dumper(), sort_keys=False, allow_unicode=True).encode("utf-8")
