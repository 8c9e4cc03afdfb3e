"""Parameter parsing and validation, benchmark declarations and the registry."""

import sys
import types

import pytest

from accelbench.core.case import Case
from accelbench.core.params import DEFAULT, Param, resolve_params
from accelbench.core.registry import Benchmark, Registry, source_version
from accelbench.errors import EXIT_USAGE, UserError
from fakes import stored_measurement

PARAMS = (
    Param("size", "int", 64, minimum=1, maximum=4096),
    Param("dtype", "str", "fp32", choices=("fp32", "fp16")),
    Param("pinned", "bool", True),
    Param("scale", "float", 1.0),
    Param("shape", "str", "4x4", check=lambda v: None if "x" in v else "expected AxB"),
)


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [("size", "128", 128), ("pinned", "no", False), ("pinned", "TRUE", True),
     ("scale", "2.5", 2.5), ("dtype", "fp16", "fp16"), ("size", 7.0, 7)],
)
def test_values_are_parsed_to_their_kind(name, text, value):
    param = next(p for p in PARAMS if p.name == name)
    assert param.parse(text) == value


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"size": "big"}, "not a valid int"),
        ({"size": "0"}, "below 1"),
        ({"size": "9999"}, "above 4096"),
        ({"dtype": "fp64"}, "not one of: fp32, fp16"),
        ({"pinned": "maybe"}, "not a valid bool"),
        ({"shape": "44"}, "expected AxB"),
        ({"colour": "red"}, "unknown parameter 'colour'"),
        # NaN compares false with every bound, so it must be refused as such.
        ({"scale": "nan"}, "scale='nan' is not a finite number"),
        ({"scale": "inf"}, "scale='inf' is not a finite number"),
        ({"scale": "-Infinity"}, "is not a finite number"),
        ({"scale": "1e999"}, "is not a finite number"),
        ({"scale": float("nan")}, "is not a finite number"),
        ({"size": float("inf")}, "not a valid int"),
        ({"size": float("nan")}, "not a valid int"),
    ],
)
def test_bad_values_are_user_errors_naming_the_problem(given, message):
    with pytest.raises(UserError, match=message) as info:
        resolve_params(PARAMS, given, "demo")
    assert info.value.exit_code == EXIT_USAGE
    assert str(info.value).startswith("demo: ")


def test_defaults_fill_what_is_not_given():
    assert resolve_params(PARAMS, {"size": "8"}) == {
        "size": 8, "dtype": "fp32", "pinned": True, "scale": 1.0, "shape": "4x4"
    }


def _bench(name="demo", entry="accelbench.core.stats:summarize"):
    return Benchmark(name, "micro", "a demo", entry, PARAMS)


def test_registry_lookup_and_suggestion():
    registry = Registry([_bench("gemm"), _bench("memory")])
    assert registry.get("gemm").name == "gemm"
    assert registry.names() == ["gemm", "memory"]
    with pytest.raises(UserError, match="did you mean gemm"):
        registry.get("gemn")


def test_duplicate_names_are_refused():
    with pytest.raises(ValueError, match="declared twice"):
        Registry([_bench("x"), _bench("x")])


def test_declarations_are_checked():
    for family in ("Micro", "", "a b", "x" * 33):
        with pytest.raises(ValueError, match="family"):
            Benchmark("x", family, "", "a:b")
    with pytest.raises(ValueError, match="module:function"):
        Benchmark("x", "micro", "", "ab")
    with pytest.raises(ValueError, match="module:function"):
        Benchmark("x", "micro", "", "a:b", views=("no-function",))
    Benchmark("x", "tally", "", "a:b")  # a new family needs no list of families


def test_views_go_to_the_benchmarks_that_declare_them(monkeypatch):
    """Each view gets the measurements of the benchmarks naming it, once, in run order;
    a benchmark this registry lacks goes to the views its whole family shares."""
    shared, own = "report_views_demo:shared", "report_views_demo:own"
    registry = Registry([
        Benchmark("a", "fam", "", "m:f", views=(shared, own)),
        Benchmark("b", "fam", "", "m:f", views=(shared,)),
        Benchmark("c", "other", "", "m:f"),
    ])

    def m(bench, family):
        return stored_measurement(Case.make(bench, "v", family, {}, "cpu"), "ok")

    ms = [m("b", "fam"), m("a", "fam"), m("c", "other"), m("gone", "fam"), m("gone", "new")]
    demo = types.ModuleType("report_views_demo")
    monkeypatch.setattr(demo, "shared",
                        lambda given: [("shared", [x.case.benchmark for x in given])],
                        raising=False)
    monkeypatch.setattr(demo, "own", lambda given: [("own", [x.case.benchmark for x in given])],
                        raising=False)
    monkeypatch.setitem(sys.modules, "report_views_demo", demo)
    # The stand-in views return (name, benchmarks) pairs in place of sections.
    got: list[object] = [out for view, given in registry.views(ms) for out in view(given)]
    assert got == [("shared", ["b", "a", "gone"]), ("own", ["a"])]


def test_a_declarations_views_leave_its_version_as_it_is(tmp_path, monkeypatch):
    module = tmp_path / "viewed_demo_bench.py"
    decl = ("from accelbench.core.registry import Benchmark\n"
            "B = Benchmark('x', 'micro', '', 'm:f'{})\n")
    module.write_text(decl.format(""))
    monkeypatch.syspath_prepend(str(tmp_path))
    first = source_version("viewed_demo_bench")
    source_version.cache_clear()
    module.write_text(decl.format(", views=('a.view:sections',)"))
    assert source_version("viewed_demo_bench") == first
    source_version.cache_clear()
    module.write_text(decl.format(", timeout_s=5.0"))
    assert source_version("viewed_demo_bench") != first


def test_version_follows_the_code_not_its_comments(tmp_path, monkeypatch):
    module = tmp_path / "versioned_demo_bench.py"
    module.write_text("def measure(ctx, params):\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = source_version("versioned_demo_bench")
    source_version.cache_clear()
    module.write_text("# a comment\ndef measure(ctx, params):  # same code\n    return 1\n")
    assert source_version("versioned_demo_bench") == first
    source_version.cache_clear()
    module.write_text("def measure(ctx, params):\n    return 2\n")
    assert source_version("versioned_demo_bench") != first
    source_version.cache_clear()


def test_case_identity_is_frozen_and_order_independent():
    a = Case.make("gemm", "v1", "micro", {"shape": "4096", "dtype": "fp16"}, "cuda:0")
    b = Case.make("gemm", "v1", "micro", {"dtype": "fp16", "shape": "4096"}, "cuda:0")
    assert a == b and hash(a) == hash(b)
    assert a.label == "gemm dtype=fp16 shape=4096"
    assert a.dtype == "fp16"
    # The comparison key ignores the version and the device index.
    c = Case.make("gemm", "v2", "micro", {"shape": "4096", "dtype": "fp16"}, "cuda:1")
    assert c.key == a.key
    assert Case.from_dict(a.to_dict()) == a


def test_version_covers_the_declared_source_modules(tmp_path, monkeypatch):
    (tmp_path / "versioned_entry.py").write_text("def measure(ctx, params):\n    return 1\n")
    helper = tmp_path / "versioned_shapes.py"
    helper.write_text("SHAPES = {'a': 1}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    bench = Benchmark("v", "micro", "", "versioned_entry:measure", (),
                      sources=("versioned_shapes",))
    first = bench.version
    source_version.cache_clear()
    helper.write_text("SHAPES = {'a': 2}\n")
    assert bench.version != first
    source_version.cache_clear()


def test_a_parameter_that_applies_only_to_some_values_is_left_out_elsewhere():
    params = (Param("dtype", "str", "fp32", choices=("fp32", "fp8")),
              Param("fast", "bool", True, only_when=("dtype", ("fp8",))))
    assert resolve_params(params, {}) == {"dtype": "fp32"}
    assert resolve_params(params, {"dtype": "fp8"}) == {"dtype": "fp8", "fast": True}
    assert resolve_params(params, {"dtype": "fp8", "fast": "no"}) == {"dtype": "fp8",
                                                                     "fast": False}
    # Given where it does not apply, it is checked, then left out: no second case.
    assert resolve_params(params, {"dtype": "fp32", "fast": "no"}) == {"dtype": "fp32"}
    with pytest.raises(UserError, match="fast='maybe' is not a valid bool"):
        resolve_params(params, {"dtype": "fp32", "fast": "maybe"})
    assert params[1].describe()["only_when"] == {"dtype": ["fp8"]}
    assert "only_when" not in params[0].describe()
    bench = Benchmark("b", "micro", "s", "accelbench.core.params:resolve_params", params)
    fp32 = [bench.case(bench.resolve({"dtype": "fp32", "fast": v}), "cpu") for v in ("no", "yes")]
    assert fp32[0] == fp32[1] and fp32[0].key == Case.make("b", "v", "micro",
                                                           {"dtype": "fp32"}, "cpu").key


def test_a_parameter_kept_at_its_default_elsewhere_keeps_the_others_identity():
    """An engine's setting crossed with engines it does not apply to: those keep their
    default, so their key is the one they have without it; one setting set aside can
    make another stop applying (the provider of an ONNX Runtime int8 recipe)."""
    params = (Param("engine", "str", "eager", choices=("eager", "ort", "int8")),
              Param("provider", "str", "", only_when=(("engine", ("ort",)),
                                                      ("recipe", ("ort-dynamic",))),
                    outside=DEFAULT),
              Param("recipe", "str", "", only_when=("engine", ("int8",)), outside=DEFAULT))
    assert resolve_params(params, {"engine": "int8", "recipe": "ort-dynamic",
                                   "provider": "cpu"}) == {
        "engine": "int8", "provider": "cpu", "recipe": "ort-dynamic"}
    assert resolve_params(params, {"engine": "ort", "recipe": "ort-dynamic",
                                   "provider": "cpu"}) == {
        "engine": "ort", "provider": "cpu", "recipe": ""}
    # The recipe goes back to its default first; then the provider no longer applies.
    assert resolve_params(params, {"engine": "eager", "recipe": "ort-dynamic",
                                   "provider": "cpu"}) == {
        "engine": "eager", "provider": "", "recipe": ""}
    assert params[1].condition_text() == "engine ort, or recipe ort-dynamic"
    assert params[1].describe()["only_when"] == {"engine": ["ort"], "recipe": ["ort-dynamic"]}
    assert params[1].describe()["outside"] == "default"
    bench = Benchmark("b", "micro", "s", "accelbench.core.params:resolve_params", params)
    plain = bench.case(bench.resolve({"engine": "eager"}), "cpu")
    crossed = bench.case(bench.resolve({"engine": "eager", "recipe": "ort-static"}), "cpu")
    assert crossed == plain and crossed.key == plain.key
    with pytest.raises(ValueError, match="unknown outside"):
        Param("x", "str", "", outside="somewhere")
