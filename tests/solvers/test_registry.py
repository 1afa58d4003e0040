"""The shared extension-point registry: eager and lazy ("module:attr") entries, metadata, and
clear errors for unknown names and unloadable targets."""

import pytest

from solvers.registry import Registry, UnknownName, load_attr


def test_eager_and_lazy_entries_resolve_and_lazy_is_cached() -> None:
    reg: Registry[object] = Registry("widget")
    reg.register("eager", len)
    reg.register("lazy", "os.path:join", inline=True)
    assert reg.get("eager") is len
    import os.path

    assert reg.get("lazy") is os.path.join
    assert reg.meta("lazy") == {"inline": True}
    assert reg.names() == ["eager", "lazy"] and "lazy" in reg and len(reg) == 2


def test_unknown_name_lists_known_ones() -> None:
    reg: Registry[object] = Registry("planner")
    reg.register("fd", len)
    with pytest.raises(UnknownName, match=r"unknown planner 'bogus'; known: fd"):
        reg.get("bogus")
    with pytest.raises(UnknownName):
        reg.meta("bogus")


def test_unloadable_target_is_a_clear_error_naming_the_entry() -> None:
    reg: Registry[object] = Registry("policy")
    reg.register("broken", "no_such_module_xyz:thing")
    with pytest.raises(UnknownName, match=r"policy 'broken'.*no_such_module_xyz:thing"):
        reg.get("broken")
    with pytest.raises(UnknownName, match="must look like"):
        load_attr("no-colon")
    reg.unregister("broken")
    assert "broken" not in reg
