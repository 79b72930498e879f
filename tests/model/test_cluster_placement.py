"""Cluster topology, GPU-set spans, gang packing and profile loading, checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis.errors import ThemisError
from themis.model.cluster import Cluster, Gpu, SetShape, Span
from themis.model.placement import OrderedPacker, Packer, pack_gang
from themis.model.profiles import ModelProfile, load_profiles

# -- Cluster.from_spec ------------------------------------------------------------------


def test_from_spec_numbers_gpus_rack_then_machine_then_gpu() -> None:
    c = Cluster.from_spec("2x3x4")
    assert c.size == 24
    assert c.shape == SetShape(24, 4, 12)
    assert len(c.machine_gpus) == 6
    # GPU 13 = rack 1 (12..23), machine 3 (12..15 is rack 1's first machine), slot 1.
    g = c.gpus[13]
    assert (g.id, g.rack, g.machine, g.name) == (13, 1, 3, "r1-m0-g1")
    assert c.machine_gpus[3] == (12, 13, 14, 15)
    assert c.rack_of == tuple([0] * 12 + [1] * 12)
    assert c.describe() == "24 GPUs in 6 machines, 2 racks"


@pytest.mark.parametrize("spec", ["1x1x1", " 1 x 2 x 3 ", "3x1x2"])
def test_from_spec_accepts_whitespace_and_small_shapes(spec: str) -> None:
    r, m, g = (int(x) for x in spec.replace(" ", "").split("x"))
    c = Cluster.from_spec(spec)
    assert c.size == r * m * g
    assert c.shape == SetShape(r * m * g, g, m * g)


@pytest.mark.parametrize("spec", ["abc", "", "2x2", "2x2x2x2", "1x1x-1", "1.5x1x1", "axbxc"])
def test_from_spec_rejects_malformed(spec: str) -> None:
    with pytest.raises(ThemisError) as err:
        Cluster.from_spec(spec)
    assert err.value.field == "--cluster"
    assert "RxMxG" in str(err.value)
    assert f"'{spec}'" in str(err.value)


@pytest.mark.parametrize("spec", ["0x1x1", "1x0x1", "1x1x0", "0x0x0"])
def test_from_spec_rejects_zero(spec: str) -> None:
    with pytest.raises(ThemisError) as err:
        Cluster.from_spec(spec)
    assert "at least 1" in str(err.value)
    assert "--cluster" in str(err.value)


# -- span / best_span / shape_of --------------------------------------------------------


@pytest.fixture
def c2x2x2() -> Cluster:
    # rack 0: machine 0 = GPUs 0,1; machine 1 = GPUs 2,3.  rack 1: machine 2 = 4,5; 3 = 6,7.
    return Cluster.from_spec("2x2x2")


def test_span(c2x2x2: Cluster) -> None:
    c = c2x2x2
    assert c.span([0]) is Span.MACHINE
    assert c.span([1, 0]) is Span.MACHINE
    assert c.span([0, 2]) is Span.RACK
    assert c.span([1, 2, 3]) is Span.RACK
    assert c.span([3, 4]) is Span.CLUSTER
    assert c.span(range(8)) is Span.CLUSTER
    assert Span.MACHINE < Span.RACK < Span.CLUSTER
    with pytest.raises(ValueError):
        c.span([])


def test_best_span(c2x2x2: Cluster) -> None:
    assert [c2x2x2.best_span(g) for g in (1, 2, 3, 4, 5, 8)] == [
        Span.MACHINE,
        Span.MACHINE,
        Span.RACK,
        Span.RACK,
        Span.CLUSTER,
        Span.CLUSTER,
    ]
    single = Cluster.from_spec("1x2x1")
    assert single.best_span(1) is Span.MACHINE
    assert single.best_span(2) is Span.RACK


def test_shape_of(c2x2x2: Cluster) -> None:
    assert c2x2x2.shape_of([]) == SetShape(0, 0, 0)
    assert c2x2x2.shape_of([0, 2, 3, 4]) == SetShape(4, 2, 3)
    assert c2x2x2.shape_of([0, 4, 6]) == SetShape(3, 1, 2)


# -- placement ----------------------------------------------------------------------------


def test_pack_gang_best_fit_chooses_fullest_hole_that_fits() -> None:
    c = Cluster.from_spec("1x3x4")  # machines: 0-3, 4-7, 8-11
    # Free: machine 0 all 4, machine 1 two (6, 7), machine 2 three (9, 10, 11).
    free = [0, 1, 2, 3, 6, 7, 9, 10, 11]
    assert pack_gang(c, free, 1) == (6,)  # fewest free that fits: machine 1 (2 free)
    assert pack_gang(c, free, 2) == (6, 7)
    assert pack_gang(c, free, 3) == (9, 10, 11)  # machine 2 (3 free), not machine 0 (4)
    assert pack_gang(c, free, 4) == (0, 1, 2, 3)
    # 5 fits no machine: one rack, fewest machines -> fullest machines first: 4 + 1 of m2.
    assert pack_gang(c, free, 5) == (0, 1, 2, 3, 9)
    assert pack_gang(c, free, 9) == tuple(free)
    assert pack_gang(c, free, 10) is None
    assert pack_gang(c, free, 0) is None


def test_pack_gang_tie_break_lower_machine_or_given_order() -> None:
    c = Cluster.from_spec("1x3x2")
    free = range(6)
    assert pack_gang(c, free, 2) == (0, 1)
    assert pack_gang(c, free, 2, machine_order=[2, 0, 1]) == (4, 5)


def test_pack_gang_prefers_rack_span_over_cluster_span(c2x2x2: Cluster) -> None:
    # Free: rack 0 has GPUs 1, 3 (two machines); rack 1 has 4, 5, 7.
    free = [1, 3, 4, 5, 7]
    # Gang 2: machine 2 has 4, 5 -> one machine.
    assert pack_gang(c2x2x2, free, 2) == (4, 5)
    # Gang 3: no machine holds 3; rack 1 holds 3 -> rack span, never across racks.
    got = pack_gang(c2x2x2, free, 3)
    assert got == (4, 5, 7)
    assert c2x2x2.span(got) is Span.RACK
    # Gang 2 when every machine has one free GPU: rack 0 (2 free) and rack 1 (2 free)
    # both fit; best fit picks the rack with fewest free (tie -> lower rack).
    assert pack_gang(c2x2x2, [1, 3, 4, 7], 2) == (1, 3)
    # Gang 4 needs both racks.
    got = pack_gang(c2x2x2, free, 4)
    assert got is not None and len(got) == 4 and set(got) <= set(free)
    assert c2x2x2.span(got) is Span.CLUSTER


def test_packer_take_removes_and_take_exact(c2x2x2: Cluster) -> None:
    pool = Packer(c2x2x2, range(8))
    assert len(pool) == 8
    assert pool.take(2) == (0, 1)
    assert pool.take(1) == (2,)  # machine 1 now has 1 free: the tightest fit
    assert len(pool) == 5
    assert pool.take_exact([4, 5])
    assert not pool.take_exact([4])  # already taken
    assert not pool.take_exact([3, 0])  # 0 is gone: nothing removed
    assert pool.gpus() == {3, 6, 7}
    assert pool.take(4) is None
    assert pool.take(3) == (3, 6, 7)
    assert len(pool) == 0


# -- profiles -------------------------------------------------------------------------------


def test_bundled_profiles_load() -> None:
    profiles = load_profiles()
    assert len(profiles) == 10
    vgg = profiles["vgg16"]
    assert vgg == ModelProfile("vgg16", 1.2, 0.72, 0.52)
    assert vgg.factor(Span.MACHINE) == 1.0
    assert vgg.factor(Span.RACK) == 0.72
    assert vgg.factor(Span.CLUSTER) == 0.52
    assert vgg.speed(4, Span.RACK) == pytest.approx(4 * 0.72 / 1.2, rel=1e-12)
    for p in profiles.values():
        assert 0 < p.cross_rack <= p.cross_machine <= 1.0


def test_best_factor_on() -> None:
    p = ModelProfile("m", 1.0, 0.5, 0.25)
    assert p.best_factor_on(2, SetShape(4, 2, 4)) == 1.0
    assert p.best_factor_on(3, SetShape(4, 2, 4)) == 0.5
    assert p.best_factor_on(3, SetShape(4, 2, 2)) == 0.25
    assert p.best_factor_on(5, SetShape(4, 2, 4)) == 0.0


def _write(tmp_path: Path, payload: object) -> Path:
    path = tmp_path / "profiles.json"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


GOOD = {"time_per_iteration": 1.0, "cross_machine": 0.5, "cross_rack": 0.25}


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"cross_machine": 0.5, "cross_rack": 0.25}, "m.time_per_iteration"),
        ({**GOOD, "time_per_iteration": "1"}, "m.time_per_iteration"),
        ({**GOOD, "time_per_iteration": True}, "m.time_per_iteration"),
        ({**GOOD, "time_per_iteration": 0}, "m.time_per_iteration"),
        ({**GOOD, "cross_machine": -0.5}, "m.cross_machine"),
        ({**GOOD, "cross_rack": 1.5}, "m.cross_rack"),
        ({**GOOD, "cross_machine": None}, "m.cross_machine"),
        ([1, 2], "m"),
    ],
)
def test_load_profiles_bad_field_names_it(tmp_path: Path, entry: object, field: str) -> None:
    path = _write(tmp_path, {"ok": GOOD, "m": entry})
    with pytest.raises(ThemisError) as err:
        load_profiles(path)
    assert err.value.field == field
    assert f"field '{field}'" in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("text", ["{", "[]", "{}", '"x"'])
def test_load_profiles_bad_json(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ThemisError) as err:
        load_profiles(path)
    assert str(path) in str(err.value)


def test_load_profiles_invalid_json_names_line(tmp_path: Path) -> None:
    path = _write(tmp_path, '{\n  "m": {\n    "time_per_iteration": ,\n  }\n}\n')
    with pytest.raises(ThemisError) as err:
        load_profiles(path)
    assert err.value.line == 3
    assert f"{path}:3" in str(err.value)


def test_load_profiles_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ThemisError) as err:
        load_profiles(tmp_path / "nope.json")
    assert "nope.json" in str(err.value)


def test_load_profiles_custom_file(tmp_path: Path) -> None:
    path = _write(tmp_path, {"m": {"time_per_iteration": 2, "cross_machine": 1, "cross_rack": 0.5}})
    assert load_profiles(path) == {"m": ModelProfile("m", 2.0, 1.0, 0.5)}


# -- topology order, shape memo, ordered packing --------------------------------------------


def test_topology_rank_lists_rack_then_machine_then_gpu() -> None:
    # GPUs numbered out of topology order: rack 1's machine first.
    gpus = [Gpu(0, "a", 2, 1), Gpu(1, "b", 0, 0), Gpu(2, "c", 2, 1), Gpu(3, "d", 1, 0)]
    cluster = Cluster(gpus)
    assert cluster.topology_rank == (2, 0, 3, 1)
    assert sorted(range(4), key=cluster.topology_rank.__getitem__) == [1, 3, 0, 2]


def test_shape_of_remembers_and_accepts_any_iterable(c2x2x2: Cluster) -> None:
    assert c2x2x2.shape_of([0, 1, 4]) == SetShape(3, 2, 2)
    assert c2x2x2.shape_of((0, 1, 4)) is c2x2x2.shape_of(iter([0, 1, 4]))
    assert c2x2x2.shape_of(()) == SetShape(0, 0, 0)


def test_ordered_packer_single_gpus_follow_the_preference(c2x2x2: Cluster) -> None:
    # One-GPU gangs come in preference order, skipping GPUs taken by whole gangs.
    pool = OrderedPacker(c2x2x2, [5, 2, 3, 6, 7, 0, 1, 4])
    assert pool.take(1) == (5,)
    assert pool.take_exact([3])
    assert pool.take(2) == (6, 7)  # the first machine with 2 free GPUs (2 is alone in its own)
    assert [pool.take(1) for _ in range(4)] == [(2,), (0,), (1,), (4,)]
    assert pool.take(1) is None and len(pool) == 0
