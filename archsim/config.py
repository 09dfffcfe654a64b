"""Config files: YAML loading that remembers line numbers, dotted-path overrides, and typed validation.

Errors name the file, the key path, the line and what is allowed (the project's error convention, README "CLI tour").
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from archsim.errors import ConfigError, UserError, nearest


@dataclass
class Doc:
    """A loaded YAML mapping plus where each key came from."""

    data: dict[str, Any]
    source: str = "<config>"
    lines: dict[str, int] = field(default_factory=dict)  # dotted key path -> 1-based line

    def line(self, key_path: str) -> int | None:
        return self.lines.get(key_path)

    def error(self, key_path: str, problem: str) -> ConfigError:
        return ConfigError(key_path, problem, source=self.source, line=self.line(key_path))


def _collect_lines(node: yaml.Node, prefix: str, out: dict[str, int], source: str = "<config>") -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            path = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            line = key_node.start_mark.line + 1
            # YAML keeps the last of two equal keys silently; a repeated `axes:` would drop an axis.
            if key_node.value in seen:
                raise ConfigError(path, f"duplicate key (first on line {seen[key_node.value]})", source=source,
                                  line=line)
            seen[key_node.value] = line
            out[path] = line
            _collect_lines(value_node, path, out, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = f"{prefix}[{i}]"
            out[path] = item.start_mark.line + 1
            _collect_lines(item, path, out, source)


def load_yaml(path: str | Path) -> Doc:
    """Load a YAML mapping, recording the line of every key. Errors name the file and line."""
    return load_yaml_text(read_text(path), str(path))


def read_text(path: str | Path, what: str = "file") -> str:
    """A user's text file; a missing or unreadable one is a one-line UserError naming it."""
    path = Path(path)
    try:
        return path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


# libyaml's parser when PyYAML was built with it (~10x faster on the presets; same resolver and constructor)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_text(text: str, source: str) -> Doc:
    try:
        node = yaml.compose(text, Loader=_LOADER)
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise UserError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    lines: dict[str, int] = {}
    if node is not None:
        _collect_lines(node, "", lines, source)
    return Doc(data=data, source=source, lines=lines)


def parse_scalar(text: str) -> Any:
    """Parse an override value the way YAML would ('20' -> 20, 'true' -> True, '[1,2]' -> list)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise UserError(f"--set {item!r}: expected KEY.PATH=VALUE, e.g. dram.timing.nRCD=20")
    key, _, value = item.partition("=")
    key = key.strip()
    if not key:
        raise UserError(f"--set {item!r}: empty key path")
    return key, parse_scalar(value.strip())


def get_path(data: dict[str, Any], key_path: str) -> Any:
    node: Any = data
    for part in key_path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(key_path)
        node = node[part]
    return node


def set_path(data: dict[str, Any], key_path: str, value: Any, source: str = "--set",
             allow_new: bool = False) -> None:
    """Set a dotted key. Unknown keys are an error naming the nearest valid ones, unless allow_new."""
    parts = key_path.split(".")
    node = data
    walked = []
    for part in parts[:-1]:
        walked.append(part)
        if not isinstance(node, dict) or part not in node or not isinstance(node[part], dict):
            valid = sorted(node) if isinstance(node, dict) else []
            hint = nearest(part, valid)
            raise ConfigError(".".join(walked), "no such section" + (f"; did you mean {', '.join(hint)}?" if hint
                              else f"; valid: {', '.join(valid)}"), source=source)
        node = node[part]
    last = parts[-1]
    if last not in node and not allow_new:
        hint = nearest(last, node)
        raise ConfigError(key_path, "no such key" + (f"; did you mean {', '.join(hint)}?" if hint
                          else f"; valid: {', '.join(sorted(node))}"), source=source)
    node[last] = value


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1} (lists are leaves)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, path))
        else:
            out[path] = value
    return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def require_int(doc_or_source: Doc | str, key_path: str, value: Any, minimum: int | None = None,
                power_of_two: bool = False) -> int:
    source = doc_or_source.source if isinstance(doc_or_source, Doc) else doc_or_source
    line = doc_or_source.line(key_path) if isinstance(doc_or_source, Doc) else None
    allowed = "an integer" + (f" >= {minimum}" if minimum is not None else "") + (" and a power of two" if power_of_two else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key_path, f"must be {allowed}, got {value!r}", source=source, line=line)
    if minimum is not None and value < minimum:
        raise ConfigError(key_path, f"must be {allowed}, got {value}", source=source, line=line)
    if power_of_two and value & (value - 1):
        raise ConfigError(key_path, f"must be {allowed}, got {value}", source=source, line=line)
    return value


def require_number(doc_or_source: Doc | str, key_path: str, value: Any, minimum: float | None = None) -> float:
    source = doc_or_source.source if isinstance(doc_or_source, Doc) else doc_or_source
    line = doc_or_source.line(key_path) if isinstance(doc_or_source, Doc) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(key_path, f"must be a number, got {value!r}", source=source, line=line)
    if minimum is not None and value < minimum:
        raise ConfigError(key_path, f"must be a number >= {minimum}, got {value}", source=source, line=line)
    return float(value)


def require_choice(doc_or_source: Doc | str, key_path: str, value: Any, choices: list[str]) -> str:
    source = doc_or_source.source if isinstance(doc_or_source, Doc) else doc_or_source
    line = doc_or_source.line(key_path) if isinstance(doc_or_source, Doc) else None
    if value not in choices:
        raise ConfigError(key_path, f"must be one of {', '.join(choices)}, got {value!r}", source=source, line=line)
    return value
