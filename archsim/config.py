"""Config files: YAML loading that remembers line numbers, dotted-path overrides, and typed validation.

Errors name the file, the key path, the line and what is allowed (the project's error convention, docs/cli.md).
"""
from __future__ import annotations

import copy
import math
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


# Bounds on what a user's file may make archsim hold (issue 35): a config, preset, sweep, study or model file
# is a few KB (the largest shipped YAML is ~40 KB), so 16 MiB is generous; a YAML file's values are counted
# as the loader expands them (an alias counts at every use), so 342 bytes of nested aliases ("billion laughs")
# cannot become a billion values, and nesting stops at a depth no config needs.
MAX_CONFIG_BYTES = 16 << 20
MAX_YAML_VALUES = 100_000
MAX_YAML_DEPTH = 64
# a run's --json result (`report`, `--from-json`): the largest shipped is ~300 KB, a long timeline a few MB
MAX_RESULT_BYTES = 256 << 20


def _collect_lines(root: yaml.Node, source: str = "<config>") -> dict[str, int]:
    """The line of every key path of a composed YAML document (dotted paths, list items as [i]), checking
    what the document expands to: no duplicate keys, no alias that contains itself, at most MAX_YAML_VALUES
    values and MAX_YAML_DEPTH levels. Iterative, so no document can exhaust Python's stack."""
    out: dict[str, int] = {}
    count = 0
    # (node, its key path, the nodes that contain it: an alias cycle shows as a node inside itself)
    stack: list[tuple[yaml.Node, str, tuple[int, ...]]] = [(root, "", ())]
    while stack:
        node, prefix, inside = stack.pop()
        count += 1
        if count > MAX_YAML_VALUES:
            raise UserError(f"{source}: expands to more than {MAX_YAML_VALUES:,} values (YAML aliases repeat "
                            "what they refer to); a config needs far fewer, so this file is refused")
        if id(node) in inside:
            raise ConfigError(prefix or "<top>", "refers to itself (a YAML alias inside its own anchor); "
                              "a config value must be finite", source=source, line=out.get(prefix))
        if len(inside) > MAX_YAML_DEPTH:
            shown = prefix if len(prefix) < 60 else f"{prefix[:28]}...{prefix[-28:]}"
            raise ConfigError(shown, f"nested more than {MAX_YAML_DEPTH} levels deep (the limit)", source=source,
                              line=node.start_mark.line + 1)
        inside = (*inside, id(node))
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in reversed(node.value):
                path = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
                stack.append((value_node, path, inside))
            for key_node, _ in node.value:
                path = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
                line = key_node.start_mark.line + 1
                # YAML keeps the last of two equal keys silently; a repeated `axes:` would drop an axis.
                if key_node.value in seen:
                    raise ConfigError(path, f"duplicate key (first on line {seen[key_node.value]})", source=source,
                                      line=line)
                seen[key_node.value] = line
                out[path] = line
        elif isinstance(node, yaml.SequenceNode):
            for i, item in reversed(list(enumerate(node.value))):
                path = f"{prefix}[{i}]"
                out[path] = item.start_mark.line + 1
                stack.append((item, path, inside))
    return out


def load_yaml(path: str | Path) -> Doc:
    """Load a YAML mapping, recording the line of every key. Errors name the file and line."""
    return load_yaml_text(read_text(path, "YAML file"), str(path))


def read_bytes(path: str | Path, what: str = "file", limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of a user's file, at most `limit` of them: a larger file (or an endless one: /dev/zero, a
    pipe that never ends) is a one-line UserError naming the limit, read no further than it; a missing or
    unreadable one too."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory; expected a {what}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise UserError(f"{path}: {what} is larger than {size_text(limit)}, the limit for a {what}; "
                        "archsim refuses it rather than read it all")
    return data


def size_text(n: int) -> str:
    """A byte count in binary units: 16 MiB, 2 GiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} bytes"


def read_text(path: str | Path, what: str = "file", limit: int = MAX_CONFIG_BYTES) -> str:
    """A user's text file (read_bytes, then UTF-8); a missing, unreadable, binary or too large one is a
    one-line UserError naming it."""
    data = read_bytes(path, what, limit)
    if b"\0" in data:
        raise UserError(f"{path}: not a text file (it holds NUL bytes); expected a {what} in UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: str | Path, what: str = "JSON file", limit: int = MAX_CONFIG_BYTES) -> Any:
    """A user's JSON file, bounded like read_text; malformed or too deeply nested JSON is a one-line UserError."""
    import json

    text = read_text(path, what, limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (not a JSON file; expected a {what})") from None
    except RecursionError:
        raise UserError(f"{path}: JSON nested too deeply to read; expected a {what}") from None


# libyaml's parser when PyYAML was built with it (~10x faster on the presets; same resolver and constructor)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_yaml(text: str, source: str, syntax: bool = True) -> dict[str, int]:
    """The line of every key path of a YAML text, once its size, nesting, aliases and keys are checked
    (_collect_lines): what may be built from it is bounded. A YAML syntax error is a one-line UserError
    (syntax=False: {}, for a caller whose own loader reports it)."""
    if len(text) > MAX_CONFIG_BYTES:
        raise UserError(f"{source}: larger than {size_text(MAX_CONFIG_BYTES)}, the limit for a YAML file")
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        if not syntax:
            return {}
        raise _yaml_error(exc, source) from None
    return _collect_lines(node, source) if node is not None else {}


def _yaml_error(exc: yaml.YAMLError, source: str) -> UserError:
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}:{mark.line + 1}" if mark else source
    return UserError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}")


def load_yaml_text(text: str, source: str) -> Doc:
    lines = check_yaml(text, source)       # before anything is built from it
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    return Doc(data=data, source=source, lines=lines)


def is_empty_yaml(text: str) -> bool:
    """True if a YAML text holds no value at all (empty, blank or comments only)."""
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


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
                power_of_two: bool = False, maximum: int | None = None, why: str = "") -> int:
    """`value` if it is an integer within the bounds, else a ConfigError naming them (`why`: the reason for the
    maximum, said in the message)."""
    source = doc_or_source.source if isinstance(doc_or_source, Doc) else doc_or_source
    line = doc_or_source.line(key_path) if isinstance(doc_or_source, Doc) else None
    allowed = "an integer" + (f" >= {minimum}" if minimum is not None else "") \
        + (f" and <= {maximum:,}" if maximum is not None else "") + (" and a power of two" if power_of_two else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key_path, f"must be {allowed}, got {value!r}", source=source, line=line)
    if minimum is not None and value < minimum:
        raise ConfigError(key_path, f"must be {allowed}, got {value}", source=source, line=line)
    if maximum is not None and value > maximum:
        raise ConfigError(key_path, f"must be {allowed}{f' ({why})' if why else ''}, got {value:,}", source=source,
                          line=line)
    if power_of_two and value & (value - 1):
        raise ConfigError(key_path, f"must be {allowed}, got {value}", source=source, line=line)
    return value


def require_number(doc_or_source: Doc | str, key_path: str, value: Any, minimum: float | None = None) -> float:
    source = doc_or_source.source if isinstance(doc_or_source, Doc) else doc_or_source
    line = doc_or_source.line(key_path) if isinstance(doc_or_source, Doc) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(key_path, f"must be a finite number, got {value!r}", source=source, line=line)
    if minimum is not None and value < minimum:
        raise ConfigError(key_path, f"must be a number >= {minimum}, got {value}", source=source, line=line)
    return float(value)


def require_choice(doc_or_source: Doc | str, key_path: str, value: Any, choices: list[str]) -> str:
    source = doc_or_source.source if isinstance(doc_or_source, Doc) else doc_or_source
    line = doc_or_source.line(key_path) if isinstance(doc_or_source, Doc) else None
    if value not in choices:
        raise ConfigError(key_path, f"must be one of {', '.join(choices)}, got {value!r}", source=source, line=line)
    return value
