"""Typed config schemas: one `@dataclass` per system whose fields carry type, default, help and allowed values.

A system module declares its config once:

    @dataclass
    class PimGptConfig:
        tokens: int = opt(1024, "tokens to decode", minimum=1)
        engine: Literal["numba"] = opt("numba", "simulation engine")

and everything else is derived from it: the defaults dict its `resolve` fills in (`defaults`), the check of a
given config (`check`: unknown keys, types, allowed values, ranges), the type check and coercion of one
`--set` / `--config` / sweep value (`lookup(...).problem/coerce`, used by archsim.keypaths.apply_overrides and
archsim.sweep.spec), the CLI flags of `archsim run` (archsim.commands.run) and the key documentation of
`archsim run --system X --help` and `archsim config show` (`keys`, `Key.describe`).

Types understood: int, float (an int is accepted), str, bool, None, Any, Literal[...], unions (`int | None`),
list[T], dict[...] (a free mapping, e.g. preset overrides) and nested schema dataclasses (sections).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from dataclasses import MISSING, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from archsim.errors import ConfigError


class _Required:
    """The default of a preset field every file must give (`opt(REQUIRED, ...)`): `build` reports it missing."""

    def __repr__(self) -> str:
        return "REQUIRED"

    def __deepcopy__(self, memo: dict[int, Any]) -> _Required:
        return self


REQUIRED: Any = _Required()


def opt(default: Any, help: str, *, choices: Any = None, minimum: float | None = None,
        maximum: float | None = None, above: float | None = None, below: float | None = None,
        power_of_two: bool = False, optional: bool = False, flag: bool = True, under: str | None = None,
        required: bool = False, overrides_of: tuple[str, str] | None = None) -> Any:
    """A schema field. `choices`: allowed values (a sequence, or a function returning one, for lists kept in
    another module); for a list-typed key they apply to each element. minimum/maximum are inclusive bounds,
    above/below exclusive ones. `optional`: the key is absent from the resolved config unless given (so configs
    that do not use it keep their hash); `default` is then only documentation (what the system uses).
    `flag=False`: no `archsim run --KEY` flag for it (e.g. a name whose flag means something else elsewhere).
    `under`: in a preset file the key sits in this section (`systolic: {height: 128}`) though the dataclass
    holds it flat (`config.height`); its key path is `systolic.height`. `required`: a preset file must give it
    (the default serves code that builds the dataclass itself); a default of REQUIRED: everyone must.
    `overrides_of=(KEY, LOADER)`: the field is a mapping of overrides of the preset that config key KEY names;
    its settable key paths are that preset's values (archsim.keypaths): LOADER is "module:function" returning
    the preset's schema dataclass (or its {key path: value}, e.g. archsim.dram.spec:preset_leaves)."""
    meta = {"help": help, "choices": choices, "minimum": minimum, "maximum": maximum, "above": above,
            "below": below, "power_of_two": power_of_two, "optional": optional, "flag": flag, "under": under,
            "required": required, "overrides_of": overrides_of}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    if isinstance(default, type) and is_dataclass(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


# ---- types --------------------------------------------------------------------------------------------------
def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _members(tp: Any) -> tuple[Any, ...]:
    return get_args(tp) if _is_union(tp) else (tp,)


def section_of(tp: Any) -> type | None:
    """The schema dataclass a type holds (itself, or one member of a union), if any."""
    for m in _members(tp):
        if isinstance(m, type) and is_dataclass(m):
            return m
    return None


_SCALARS: dict[Any, Any] = {
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    str: lambda v: isinstance(v, str),
}


def _ok(tp: Any, value: Any) -> bool:
    if tp is Any:
        return True
    if _is_union(tp):
        return any(_ok(m, value) for m in get_args(tp))
    origin = get_origin(tp)
    if origin is Literal:
        return any(value == a and isinstance(value, bool) == isinstance(a, bool) for a in get_args(tp))
    if tp is None or tp is type(None):
        return value is None
    if tp in _SCALARS:
        return _SCALARS[tp](value)
    if origin is list or tp is list:
        (item,) = get_args(tp) or (Any,)
        return isinstance(value, list) and all(_ok(item, v) for v in value)
    if origin is tuple:                      # tuple[T, ...]: a YAML list, held as a tuple once built
        item = get_args(tp)[0]
        return isinstance(value, list | tuple) and all(_ok(item, v) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, dict)
    if isinstance(tp, type) and is_dataclass(tp):
        hints = _hints(tp)
        return isinstance(value, dict) and all(k in hints and _ok(hints[k], v) for k, v in value.items())
    raise TypeError(f"schema type {tp!r} is not supported")


def _describe_type(tp: Any) -> str:
    if tp is Any:
        return "any value"
    if _is_union(tp):
        parts = [_describe_type(m) for m in get_args(tp) if m is not type(None)]
        if type(None) in get_args(tp):
            parts.append("null")
        return " or ".join(parts)
    origin = get_origin(tp)
    if origin is Literal:
        args = get_args(tp)
        return _show(args[0]) if len(args) == 1 else "one of " + ", ".join(map(str, args))
    if tp is type(None):
        return "null"
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if tp in names:
        return names[tp]
    if origin in (list, tuple) or tp is list:
        item = (get_args(tp) or (Any,))[0]
        return "a list" + ("" if item is Any else f" of {_plural(_describe_type(item))}")
    if origin is dict or tp is dict:
        return "a mapping"
    if isinstance(tp, type) and is_dataclass(tp):
        return "a mapping of " + ", ".join(_hints(tp))
    raise TypeError(f"schema type {tp!r} is not supported")


def _plural(text: str) -> str:
    return {"an integer": "integers", "a number": "numbers", "a string": "strings"}.get(text, text)


def _short_type(tp: Any) -> str:
    """Compact form for help listings: int, float | null, list[str], one of a|b."""
    if tp is Any:
        return "any"
    if _is_union(tp):
        return " | ".join(_short_type(m) for m in get_args(tp))
    origin = get_origin(tp)
    if origin is Literal:
        return "|".join(map(str, get_args(tp)))
    if tp is type(None):
        return "null"
    if origin in (list, tuple) or tp is list:
        item = (get_args(tp) or (Any,))[0]
        return f"list[{_short_type(item)}]"
    if origin is dict or tp is dict:
        return "mapping"
    if isinstance(tp, type) and is_dataclass(tp):
        return "section"
    return getattr(tp, "__name__", str(tp))


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, include_extras=False)
    return _HINTS[cls]


# ---- keys ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Key:
    """One key path of a schema."""

    path: str
    type: Any
    default: Any
    help: str
    choices: Any = None
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    below: float | None = None
    power_of_two: bool = False
    optional: bool = False
    flag: bool = True
    overrides_of: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    def allowed(self) -> list[Any] | None:
        """The allowed values (of each element, for a list key), or None when any value of the type is."""
        if self.choices is not None:
            got = self.choices() if callable(self.choices) else self.choices
            return list(got)
        # a Literal is the list of allowed values when it is the whole type (besides null); beside other types
        # (`list[str] | Literal[False]`) it is one more alternative
        members = [m for m in _members(self.type) if m is not type(None)]
        if not members or any(get_origin(m) is not Literal for m in members):
            return None
        return [a for m in members for a in get_args(m)]

    def others(self) -> list[Any]:
        """Typed alternatives beside the allowed values (e.g. the integer of `int | str` with choices ("auto",))."""
        return [m for m in _members(self.type) if get_origin(m) is not Literal and m is not type(None)
                and m is not str and get_origin(m) not in (list, tuple) and m is not bool]

    def closed(self) -> bool:
        """Only the allowed values (or null) are valid: a CLI flag may list them as its choices."""
        return self.allowed() is not None and not self.others() and self.scalar()

    def nullable(self) -> bool:
        return self.type is Any or any(m is type(None) for m in _members(self.type))

    def scalar(self) -> bool:
        """A single value (a CLI flag can set it): no list, mapping or section in its type."""
        return all(m in (int, float, str, bool, type(None)) or get_origin(m) is Literal for m in _members(self.type))

    def bool_only(self) -> bool:
        return all(m in (bool, type(None)) for m in _members(self.type)) and bool in _members(self.type)

    def bounds(self) -> str:
        parts = []
        integer = int in _members(self.type)
        for word, bound in ((">=", self.minimum), (">", self.above), ("<=", self.maximum), ("<", self.below)):
            if bound is not None:
                parts.append(f"{word} {int(bound)}" if integer and float(bound).is_integer() else f"{word} {bound:g}")
        if self.power_of_two:
            parts.append("a power of two")
        return " and ".join(parts)

    def kind(self) -> str:
        """What the key accepts, as a phrase: "an integer >= 1", "one of iteration, serving, or null"."""
        allowed = self.allowed()
        is_list = any(get_origin(m) in (list, tuple) for m in _members(self.type))
        if allowed is not None:
            text = "one of " + ", ".join(map(str, allowed))
            if is_list:
                text = f"{text}, or a list of them"
            others = self.others()
            if others:
                text += " or " + " or ".join(_describe_type(m) for m in others)
                if self.bounds():
                    text += " " + self.bounds()
        else:
            text = _describe_type(self.type if not self.nullable() else
                                  Union[tuple(m for m in _members(self.type) if m is not type(None))])  # noqa: UP007
            if self.bounds():
                text += " " + self.bounds()
        if self.nullable() and self.type is not Any:
            text += ", or null"
        return text

    def problem(self, value: Any) -> str | None:
        """Why `value` is not allowed here (None if it is)."""
        if value is None and self.nullable():
            return None
        if not finite(value):     # nan and inf pass every comparison test a bound makes
            return f"must be {self.kind()}: a finite number, got {value!r}"
        allowed = self.allowed()
        if allowed is not None:
            items = value if isinstance(value, list | tuple) and any(get_origin(m) in (list, tuple) for m in _members(self.type)) \
                else [value]
            # a typed alternative (e.g. an integer besides "auto") is allowed outside the choices
            others = self.others()
            for item in items:
                if any(item == a and isinstance(item, bool) == isinstance(a, bool) for a in allowed):
                    continue
                if others and any(_ok(m, item) for m in others) and self._in_bounds(item):
                    continue
                return f"must be {self.kind()}, got {value!r}"
            return None
        if not _ok(self.type, value):
            return f"must be {self.kind()}, got {value!r}" + _number_hint(self.type, value)
        if not self._in_bounds(value):
            return f"must be {self.kind()}, got {value!r}"
        return None

    def _in_bounds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return True
        if self.minimum is not None and value < self.minimum:
            return False
        if self.maximum is not None and value > self.maximum:
            return False
        if self.above is not None and value <= self.above:
            return False
        if self.below is not None and value >= self.below:
            return False
        return not (self.power_of_two and (value < 1 or int(value) & (int(value) - 1)))

    def coerce(self, value: Any) -> Any:
        """A value as typed on the command line, made the key's type where YAML read it otherwise: "1e9" (YAML
        1.1 reads it as text) for a number key, 7 for a string key. Anything else is returned unchanged."""
        if _ok(self.type, value):
            return value
        members = _members(self.type)
        if isinstance(value, str) and float in members:
            try:
                return float(value)
            except ValueError:
                return value
        if isinstance(value, int | float) and not isinstance(value, bool) and str in members:
            return str(value)
        return value

    def describe(self) -> str:
        """One line for help listings: type, default and allowed values."""
        if section_of(self.type) is not None:
            return self.kind() + ("; absent from the config unless given" if self.optional else "")
        if self.default is REQUIRED:
            return f"{self.kind()}; required"
        if self.optional and self.default is None:
            return f"{self.kind()}; no default (absent from the config unless given)"
        return f"{self.kind()}; default {_show(self.default)}" + (" (absent from the config unless given)"
                                                                   if self.optional else "")


def finite(value: Any) -> bool:
    """False for a float that is nan or infinite (anywhere inside a list or mapping), True otherwise."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(finite(v) for v in value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    return True


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | dict):
        import json

        return json.dumps(value)
    return str(value)


def _number_hint(tp: Any, value: Any) -> str:
    if isinstance(value, str) and any(m in (int, float) for m in _members(tp)):
        try:
            if not math.isfinite(float(value)):
                return " (a finite number)"
        except ValueError:
            return ""
        return " (YAML reads it as text: write 1.0e+9, or give it with --set, which reads 1e9 as a number)"
    return ""


def keys(cls: type, prefix: str = "") -> list[Key]:
    """Every key path of a schema, in declaration order; a section's keys follow it (its own entry included)."""
    out = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        path = prefix + file_name(f)
        out.append(_field_key(f, hints[f.name], path))
        sub = section_of(hints[f.name])
        if sub is not None:
            out.extend(keys(sub, path + "."))
    return out


def file_name(f: dataclasses.Field) -> str:
    """A field's key in a file: its name, inside its `under` section if it has one."""
    under = f.metadata.get("under")
    return f"{under}.{f.name}" if under else f.name


def _field_default(f: dataclasses.Field) -> Any:
    """A field's default; a section's as the mapping of its keys' defaults (a section with REQUIRED keys
    cannot be built without a file)."""
    if f.default is not MISSING:
        return f.default
    factory = f.default_factory
    if isinstance(factory, type) and is_dataclass(factory):
        return {g.name: _field_default(g) for g in dataclasses.fields(factory)}
    return factory()  # type: ignore[misc]


def _field_key(f: dataclasses.Field, tp: Any, path: str) -> Key:
    meta = f.metadata
    default = _field_default(f)
    if is_dataclass(default):
        default = dataclasses.asdict(default)
    return Key(path=path, type=tp, default=default, help=meta.get("help", ""),
               choices=meta.get("choices"), minimum=meta.get("minimum"), maximum=meta.get("maximum"),
               above=meta.get("above"), below=meta.get("below"),
               power_of_two=meta.get("power_of_two", False), optional=meta.get("optional", False),
               flag=meta.get("flag", True), overrides_of=meta.get("overrides_of"))


def lookup(cls: type, key_path: str) -> Key | None:
    """The Key of a dotted path, or None if the schema does not describe it (e.g. inside a free mapping)."""
    for key in keys(cls):
        if key.path == key_path:
            return key
    return None


def defaults(cls: type) -> dict[str, Any]:
    """The defaults of every non-optional key, in declaration order (sections as dicts)."""
    out = {}
    for key in keys(cls):
        if "." not in key.path and not key.optional:
            out[key.path] = copy.deepcopy(key.default)
    return out


def variant(configs: typing.Mapping[str, type], choice: str, values: typing.Mapping[str, Any], key: str,
            schema_cls: type | None = None) -> Any:
    """The frozen sub-config of the variant named `choice` (a system's choice key, e.g. pimgpt's `schedule`):
    its dataclass in `configs`, each field filled from `values` (the resolved config) under the same top-level
    key, so the variant's knobs keep their key paths (`--set`, sweeps and help unchanged); an optional key the
    config leaves out takes the default `schema_cls` documents for it (not needed when `values` has every key).
    Lists become tuples (the sub-config is immutable). An unknown choice is a ConfigError at `key` naming the
    variants."""
    cls = configs.get(choice)
    if cls is None:
        raise ConfigError(key, f"must be one of {', '.join(map(str, configs))}, got {choice!r}")
    documented = {k.path: k.default for k in keys(schema_cls) if "." not in k.path} if schema_cls else {}

    def frozen(value: Any) -> Any:
        return tuple(frozen(v) for v in value) if isinstance(value, list) else value

    return cls(**{f.name: frozen(values[f.name] if f.name in values else copy.deepcopy(documented[f.name]))
                  for f in dataclasses.fields(cls)})


def check(cls: type, config: dict[str, Any], system: str, allow: tuple[str, ...] = ("system",),
          source: str | None = None) -> None:
    """Raise a ConfigError for the first unknown key or bad value of `config` (only keys it gives are checked;
    free mappings are left to the system)."""
    names = [f.name for f in dataclasses.fields(cls)]
    for key in config:
        if key not in names and key not in allow:
            raise ConfigError(key, f"unknown key for system {system}; allowed: {', '.join(sorted(names))}",
                              source=source)
    check_values(cls, config, "", source)


def check_values(cls: type, data: dict[str, Any], prefix: str, source: str | None) -> None:
    """Raise a ConfigError (key path `prefix` + field) for the first value of `data` its field declaration
    rejects (type, allowed values, range); keys the schema does not declare are left alone."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        sub = section_of(hints[f.name])
        if sub is not None and isinstance(value, dict):
            sub_names = [g.name for g in dataclasses.fields(sub)]
            for k in value:
                if k not in sub_names:
                    raise ConfigError(f"{prefix}{f.name}.{k}", f"unknown key; allowed: {', '.join(sub_names)}",
                                      source=source)
            check_values(sub, value, f"{prefix}{f.name}.", source)
            continue
        key = lookup(cls, f.name)
        assert key is not None
        problem = key.problem(value)
        if problem:
            raise ConfigError(prefix + f.name, problem, source=source)


def yaml_with_help(cls: type, config: dict[str, Any], width: int = 118) -> str:
    """`config` (a resolved config of this schema) as YAML, each schema key preceded by its help and type as
    `#` comments. Keys the schema does not describe (free mappings) are dumped as they are."""
    import yaml

    lines: list[str] = []
    _emit(cls, config, "", 0, lines, yaml)
    return "\n".join(lines) + "\n"


def _emit(cls: type | None, data: dict[str, Any], prefix: str, indent: int, lines: list[str], yaml: Any) -> None:
    """cls is the schema's root class (keys are looked up by full path), None inside a free mapping."""
    pad = " " * indent
    for name, value in data.items():
        key = lookup(cls, prefix + name) if cls is not None else None
        if key is not None:
            lines.append(f"{pad}# {key.help}")
            lines.append(f"{pad}#   {key.describe()}")
        sub = section_of(key.type) if key is not None else None
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{name}:")
            _emit(cls if sub is not None else None, value, prefix + name + ".", indent + 2, lines, yaml)
        else:
            text = yaml.safe_dump({name: value}, default_flow_style=True, sort_keys=False, width=10**6).strip()
            lines.append(pad + (text[1:-1] if text.startswith("{") else text))


# ---- presets: a YAML file built into its frozen schema dataclass -------------------------------------------
def build(cls: type, data: typing.Mapping[str, Any], where: Any, prefix: str = "") -> Any:
    """The schema dataclass `cls` built from `data` (a preset's mapping), every value checked against its field
    declaration (type, allowed values, range) and every unknown or missing key reported with `where(path,
    problem)` (a ConfigError naming the file, the key path and its line); sections are built as their own
    schema dataclasses (a `dict[str, Section]` field: each value as one), lists of a tuple field become tuples,
    an absent key takes its default (`REQUIRED` or `required=True`: an error). A check the dataclass makes
    itself (`__post_init__`, rules across fields) is reported at its key path the same way."""
    if not isinstance(data, dict):
        raise where(prefix.rstrip(".") or "<top>", f"must be a mapping of {', '.join(_hints(cls))}, "
                    f"got {type(data).__name__}")
    fields = dataclasses.fields(cls)
    _check_known(fields, data, where, prefix)
    values: dict[str, Any] = {}
    for f in fields:
        src = data.get(f.metadata["under"], {}) if f.metadata.get("under") else data
        if f.name in src:
            values[f.name] = _built_value(f, _hints(cls)[f.name], src[f.name], where, prefix + file_name(f))
        else:
            _absent(f, _hints(cls)[f.name], values, where, prefix + file_name(f))
    try:
        return cls(**values)
    except ConfigError as exc:       # the dataclass's own rule: at the key path it names, in the file
        head, _, rest = exc.key_path.partition(".")
        named = {f.name: file_name(f) for f in fields}
        path = named.get(head, head) + (f".{rest}" if rest else "")
        raise where(f"{prefix}{path}", exc.problem) from None


def _check_known(fields: tuple[dataclasses.Field, ...], data: dict[str, Any], where: Any, prefix: str) -> None:
    """Every key of `data` (and of each file section that holds flat fields) is a field."""
    unders = sorted({f.metadata.get("under") for f in fields} - {None})
    names = [f.name for f in fields if not f.metadata.get("under")] + unders
    for name in data:
        if name not in names:
            raise where(f"{prefix}{name}", f"unknown key; allowed keys: {', '.join(names)}")
    for under in unders:
        inner = [f.name for f in fields if f.metadata.get("under") == under]
        got = data.get(under, {})
        if not isinstance(got, dict):
            raise where(f"{prefix}{under}", f"must be a mapping of {', '.join(inner)}")
        for name in got:
            if name not in inner:
                raise where(f"{prefix}{under}.{name}", f"unknown key; allowed keys: {', '.join(inner)}")


def _absent(f: dataclasses.Field, hint: Any, values: dict[str, Any], where: Any, path: str) -> None:
    """A key the file leaves out: missing if required, a section built from its defaults, else the default."""
    if _field_default(f) is REQUIRED or f.metadata.get("required"):
        raise where(path, f"missing ({f.metadata['help']})" if f.metadata.get("help") else "missing")
    sub = section_of(hint)
    if sub is not None and _field_default(f) is not None:
        values[f.name] = build(sub, {}, where, path + ".")


def _built_value(f: dataclasses.Field, hint: Any, value: Any, where: Any, path: str) -> Any:
    sub = section_of(hint)
    if sub is not None and isinstance(value, dict):
        return build(sub, value, where, path + ".")
    problem = _field_key(f, hint, path).problem(value)
    if problem:
        raise where(path, problem)
    each = _section_values(hint)
    if each is not None:
        return {k: build(each, v, where, f"{path}.{k}.") for k, v in value.items()}
    if isinstance(value, list) and any(get_origin(m) is tuple for m in _members(hint)):
        return tuple(value)
    return value


def _section_values(tp: Any) -> type | None:
    """X of a `dict[str, X]` type whose values are schema sections, else None."""
    if get_origin(tp) is dict:
        args = get_args(tp)
        if len(args) == 2 and isinstance(args[1], type) and is_dataclass(args[1]):
            return args[1]
    return None


def load(cls: type, path: str | Path, overrides: typing.Mapping[str, Any] | None = None,
         find: typing.Callable[[str], Path] | None = None, label: str = "--set") -> Any:
    """A preset file built into its schema dataclass `cls` (`build`): errors name the file, the key path and its
    line. `extends: NAME` takes every value of preset NAME (found by `find`, else beside the file) that this
    file does not set, sections merged key by key, as DRAM presets do. `overrides` replace values before the
    check, given in the file's shape ({"systolic": {"height": 256}}), by key path ({"systolic.height": 256}) or
    both, sections merged key by key; an error in one names `label` as its place."""
    from archsim.config import deep_merge, flatten

    data, doc = _read_extends(Path(path), find, ())
    nested: dict[str, Any] = {}
    for key_path, value in (overrides or {}).items():
        node = nested
        *parents, last = str(key_path).split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = _coerced(cls, str(key_path), value)
    given = set(flatten(nested)) | set(_section_paths(nested))
    data = deep_merge(data, nested)

    def where(key_path: str, problem: str) -> ConfigError:
        if key_path in given:
            return ConfigError(key_path, problem, source=label)
        return doc.error(key_path, problem)

    return build(cls, data, where)


def _section_paths(data: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.append(prefix + key)
            out.extend(_section_paths(value, f"{prefix}{key}."))
    return out


def _coerced(cls: type, key_path: str, value: Any) -> Any:
    """An override value made its key's type where it was typed as text ("1e9" for a number key)."""
    key = lookup(cls, key_path)
    return key.coerce(value) if key is not None else value


def _read_extends(path: Path, find: typing.Callable[[str], Path] | None, seen: tuple[str, ...]) -> tuple[dict, Any]:
    from archsim.config import Doc, deep_merge, load_yaml

    doc = load_yaml(path)
    base_name = doc.data.get("extends")
    if base_name is None:
        return doc.data, doc
    if not isinstance(base_name, str):
        raise doc.error("extends", f"must be a preset name, got {base_name!r}")
    if base_name in seen or base_name == path.stem:
        raise doc.error("extends", f"cycle through {' -> '.join((*seen, path.stem, base_name))}")
    base_path = find(base_name) if find else path.with_name(f"{base_name}.yaml")
    base, _ = _read_extends(Path(base_path), find, (*seen, path.stem))
    own = {k: v for k, v in doc.data.items() if k != "extends"}
    data = deep_merge({k: v for k, v in base.items() if k not in ("name", "source")}, own)
    return data, Doc(data=data, source=doc.source, lines=doc.lines)


def load_preset(cls: type, label: str, directory: Path, name_or_path: str | Path,
                overrides: typing.Mapping[str, Any] | None = None, blame: str = "--set") -> tuple[Any, Path]:
    """A shipped preset of one kind (`directory`/<name>.yaml, `label` naming the kind in errors: "NPU") or a
    user's file, built into `cls` (`load`; `extends:` names a shipped preset of the same kind; an error in an
    override names `blame`). Returns the preset and its file."""
    from archsim import paths

    path = paths.preset_file(label, directory, name_or_path)
    return load(cls, path, overrides, find=lambda name: paths.preset_file(label, directory, name),
                label=blame), path


def validate(obj: Any) -> None:
    """Check every field of a schema dataclass instance against its declaration (for one built in code, not
    read from a file: `build` checks a file's values with their lines); a ConfigError at the first bad field."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is REQUIRED:
            raise ConfigError(f.name, "missing", source=type(obj).__name__)
        if is_dataclass(value):
            continue                      # a section validates itself when it is built
        problem = _field_key(f, hints[f.name], f.name).problem(value)
        if problem:
            raise ConfigError(f.name, problem, source=type(obj).__name__)


def leaves(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Every value of a built schema dataclass by its key path in a file (sections walked; a field held flat
    under a file section at its `under` path), lists for tuples: what `--set` may override."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        path = prefix + file_name(f)
        if is_dataclass(value):
            out.update(leaves(value, path + "."))
        elif isinstance(value, dict) and value and all(is_dataclass(v) for v in value.values()):
            for k, v in value.items():
                out.update(leaves(v, f"{path}.{k}."))
        elif isinstance(value, dict) and value:
            from archsim.config import flatten

            out.update({f"{path}.{k}": v for k, v in flatten(value).items()})
        else:
            out[path] = list(value) if isinstance(value, tuple) else value
    return out
