"""What libraries warn of while a case runs is kept in its record, once, not printed."""

from __future__ import annotations

import logging
import warnings

import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import STATUS_OK, merge_processes
from accelbench.runner.library_log import MAX_KEPT, library_warnings
from fakes import stored_measurement


def test_logger_records_and_warnings_are_kept_once_and_not_printed(capsys, caplog) -> None:
    torch_logger = logging.getLogger("torch")
    before = (torch_logger.handlers[:], torch_logger.propagate)
    with library_warnings() as said:
        for _ in range(3):  # every process of every case would print it again
            logging.getLogger("torch.utils._pytree").warning(
                "<enum 'KernelPreference'> is an Enum subclass and is now natively "
                "supported by torch.compile")
        logging.getLogger("transformers.modeling_utils").warning("weights  not\n tied")
        logging.getLogger("torch").info("below WARNING: not kept")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            with library_warnings() as inner:
                warnings.warn("torch.ao.quantization is deprecated", FutureWarning,
                              stacklevel=1)
    assert said[0].startswith("torch.utils._pytree: <enum 'KernelPreference'> is an Enum")
    assert said[1:] == ["transformers.modeling_utils: weights not tied"]  # one line
    assert inner == ["FutureWarning: torch.ao.quantization is deprecated"]
    captured = capsys.readouterr()
    assert "KernelPreference" not in captured.err + captured.out
    assert (torch_logger.handlers, torch_logger.propagate) == before  # left as it was
    with library_warnings() as ours:
        logging.getLogger("accelbench.store").warning("our own: handled as it would be")
    assert ours == [] and "our own: handled as it would be" in caplog.text


def test_a_library_that_sets_its_logging_up_inside_the_block_keeps_that_set_up() -> None:
    """torch installs its stderr handler when first imported, often inside a case."""
    logger = logging.getLogger("freshlib")
    logger.handlers, logger.propagate = [], True
    with library_warnings() as said:
        handler = logging.StreamHandler()
        logger.addHandler(handler)
        logger.propagate = False
        logger.warning("configured, then warned")
    assert said == ["freshlib: configured, then warned"]
    assert logger.handlers == [handler] and logger.propagate is False
    logger.removeHandler(handler)


def test_what_is_kept_is_bounded() -> None:
    with library_warnings() as said:
        for i in range(3 * MAX_KEPT):
            logging.getLogger("torchao").warning("line %d %s", i, "x" * 1000)
    assert len(said) == MAX_KEPT and all(len(line) <= 500 for line in said)


def test_the_lines_of_every_process_are_merged_once() -> None:
    case = Case.make("gemm", "v", "micro", {"shape": "64"}, "cpu")
    parts = [stored_measurement(case, STATUS_OK, samples=(1e-3, 1.1e-3), number=1,
                                details={"library_warnings": lines})
             for lines in (["torch: a"], ["torch: a", "torch: b"], [])]
    merged = merge_processes(parts)
    assert merged.details["library_warnings"] == ["torch: a", "torch: b"]


@pytest.mark.parametrize("level", [logging.ERROR, logging.CRITICAL])
def test_errors_are_kept_too(level: int) -> None:
    with library_warnings() as said:
        logging.getLogger("onnxruntime").log(level, "provider fell back to CPU")
    assert said == ["onnxruntime: provider fell back to CPU"]
