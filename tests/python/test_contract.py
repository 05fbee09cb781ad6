"""The typed Python/C++ contract: the codes that cross as ints are IntEnums
bound from the C++ enums, and every code the engine sends is one of them."""
import enum

import pytest
import torch

import stoker
from stoker import _native as N


def test_codes_are_int_enums_bound_from_cpp():
    expected = {
        "TaskKind": {"INDICES": 0, "PICKLED_INDEX": 1, "ITER_BATCH": 2, "ITER_ITEM": 3, "INDEX": 4},
        "TaskMsg": {"FILL": 1, "RESUME": 2},
        "SlotResult": {"OK": 0, "ERROR": 1, "STOP_ITERATION": 2, "CANCELLED": 3, "NATIVE_ERROR": 4},
        "PublishMode": {"COLLATE": 0, "PRESERVE": 1},
        "PublishOutcome": {"FALLBACK": 0, "PUBLISHED": 1, "CANCELLED": 2},
        "PumpCode": {"BATCH": 0, "ERROR": 1, "WORKER_EXIT": 2, "END": 3, "TIMEOUT": 4, "BATCH_FLAGGED": 5},
    }
    for name, members in expected.items():
        cls = getattr(N, name)
        assert cls is getattr(N.lib, name) and issubclass(cls, enum.IntEnum)
        assert {m.name: int(m) for m in cls} == members, name


class Flaky(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        if i == 13:
            raise KeyError(i)
        return i


def test_every_code_the_pump_sends_is_a_pump_code(monkeypatch):
    seen = []
    it_cls = type(iter(stoker.DataLoader(Flaky(), batch_size=4, num_workers=1)))
    real = it_cls._outcome

    def spy(self, code, value):
        seen.append(N.PumpCode(code))  # ValueError for a code that is not one
        return real(self, code, value)
    monkeypatch.setattr(it_cls, "_outcome", spy)
    loader = stoker.DataLoader(Flaky(), batch_size=4, num_workers=2, in_order=True)
    got = []
    with pytest.raises(KeyError):
        for b in loader:
            got.append(b.tolist())
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert N.PumpCode.ERROR in seen
