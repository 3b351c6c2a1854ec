"""``Migration.plaintext_metadata`` is ``unsealed_metadata`` now (docs/glossary.md).

The 0.3 spelling, as a keyword and as an attribute, works with a
`DeprecationWarning` naming the new one until 0.5; passing both spellings is
refused, whatever their values. The saver option ``plaintext_metadata=`` is
another thing and keeps its name (tests/sealing).
"""

from __future__ import annotations

import dataclasses
import pickle
import warnings

import pytest

from secure_serde import ConfigurationError, Migration


def test_the_switch_is_unsealed_metadata() -> None:
    on = Migration(unsealed_metadata=True)
    assert on.unsealed_metadata is True
    assert on.enabled() == ("unsealed_metadata",)
    assert "unsealed_metadata=True" in repr(on)
    assert Migration.EVERYTHING.unsealed_metadata is True
    assert Migration.NONE.unsealed_metadata is False
    assert Migration(False, False, False, False, True) == on
    assert dataclasses.replace(on, plaintext=True).enabled() == ("plaintext", "unsealed_metadata")
    assert pickle.loads(pickle.dumps(on)) == on
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        Migration(plaintext=True, unbound=True, unsealed_metadata=True).enabled()


@pytest.mark.parametrize("value", [True, False])
def test_the_old_keyword_warns_and_sets_the_new_switch(value: bool) -> None:
    with pytest.warns(DeprecationWarning, match=r"plaintext_metadata .*unsealed_metadata") as seen:
        old = Migration(plaintext_metadata=value)
    assert old == Migration(unsealed_metadata=value)
    assert seen[0].filename == __file__


def test_the_old_attribute_warns_and_reads_the_new_switch() -> None:
    for value in (True, False):
        with pytest.warns(DeprecationWarning, match="unsealed_metadata"):
            assert Migration(unsealed_metadata=value).plaintext_metadata is value


@pytest.mark.parametrize(("new", "old"), [(True, True), (False, True), (True, False)])
def test_both_spellings_are_refused(new: bool, old: bool) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        Migration(unsealed_metadata=new, plaintext_metadata=old)
