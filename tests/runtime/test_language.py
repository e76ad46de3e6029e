"""The language labsupport speaks: set by the notebook (or LABSUPPORT_LANG), never by LANG."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labsupport.runtime import language
from labsupport.runtime.check import check_function, check_values
from labsupport.runtime.language import ENV, _, set_language

ROOT = Path(__file__).resolve().parents[2]
COMPILED = ROOT / "labsupport" / "runtime" / "locale" / "zh_CN" / "LC_MESSAGES" / "labsupport.mo"


@pytest.fixture(autouse=True)
def english_afterwards(monkeypatch):
    """Each test starts in English and leaves the process in English."""
    monkeypatch.delenv(ENV, raising=False)
    yield
    os.environ.pop(ENV, None)


def _double(x: int) -> int:
    return 2 * x


def _wrong_double(x: int) -> int:
    return 2 * x + 1


def _difference() -> str | None:
    from labsupport.runtime.check import describe_difference

    return describe_difference(3, 4)


def test_the_compiled_catalogue_is_in_the_package():
    assert COMPILED.is_file() and COMPILED.stat().st_size > 1000


def test_set_language_turns_a_graders_fail_message_chinese(capsys):
    english = check_function(_wrong_double, _double, [(3,)], name="double")
    assert english.message == "FAIL double(3,): expected 6, got 7"
    set_language("zh_CN")
    chinese = check_function(_wrong_double, _double, [(3,)], name="double")
    # The status word stays English (the HTML badge and the stored outputs read it).
    assert chinese.message == "FAIL double(3,): 期望 6，得到 7"
    assert not chinese.passed
    assert "FAIL double(3,): 期望 6，得到 7" in capsys.readouterr().out  # what was shown
    todo = check_values(lambda: (_ for _ in ()).throw(NotImplementedError), [1, 2])
    assert todo.message.startswith("TODO 你的预测 还没有实现。\n  把 `raise NotImplementedError`")
    set_language("en")
    assert check_function(_wrong_double, _double, [(3,)], name="double").message == (
        english.message
    )


def test_aliases_and_a_clear_error_for_an_unknown_language():
    set_language("zh-CN")
    assert language.get_language() == "zh_CN" and _("expected") == "期望"
    set_language(None)
    assert language.get_language() == "en" and _("expected") == "expected"
    with pytest.raises(ValueError, match='set_language\\("zh_CN"\\)'):
        set_language("fr")
    assert _("") == ""  # never the catalogue's header


def test_lang_and_language_alone_change_nothing():
    env = dict(os.environ, LANG="zh_CN.UTF-8", LANGUAGE="zh_CN:zh", LC_ALL="zh_CN.UTF-8")
    env.pop(ENV, None)
    code = (
        "from labsupport.runtime.check import check_values\n"
        "print(check_values([1, 2], [1, 3]).message == 'FAIL Your prediction: wrong on rank 1 "
        "of 2.\\n  rank 1: the ranks hold 3, you said 2')"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "True", out.stdout + out.stderr


def test_labsupport_lang_speaks_chinese_in_a_script():
    env = dict(os.environ, **{ENV: "zh_CN"})
    code = "from labsupport.runtime.check import check_values\ncheck_values([1, 2], [1, 3])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "FAIL 你的预测：2 个 rank 中，rank 1 的结果不对。" in out.stdout, out.stdout + out.stderr
    assert "  rank 1：各 rank 上实际是 3，你预测的是 2" in out.stdout


@pytest.mark.timeout(180)
def test_the_ranks_speak_the_kernels_language_even_a_standby_group_started_before():
    from labsupport.runtime.launch import Cluster, RankError

    def message() -> str:
        from labsupport.runtime.language import _

        return _("expected")

    with Cluster(world_size=2, backend="gloo", standby=True, timeout=60) as cluster:
        assert cluster.call(message) == ["expected", "expected"]  # started in English
        set_language("zh_CN")
        assert cluster.call(message) == ["期望", "期望"]
        # A rank dies: the spare group (started in English) takes over, and speaks Chinese.
        with pytest.raises(RankError) as failure:
            cluster.exec("import os\nif rank == 1:\n    os._exit(3)")
        assert "rank 1" in str(failure.value)
        assert cluster.call(message) == ["期望", "期望"]
        # A message formatted on a rank comes out in the language too.
        assert cluster.call(_difference) == ["期望 3，得到 4"] * 2
        # ... and the launcher's summary, in the kernel.
        with pytest.raises(RankError, match="rank 0 抛出了 ValueError：boom"):
            cluster.exec("if rank == 0:\n    raise ValueError('boom')")
        set_language("en")
        assert cluster.call(message) == ["expected", "expected"]


def test_a_widgets_labels_follow_the_language():
    pytest.importorskip("ipywidgets")
    from labsupport import schedules
    from labsupport.runtime.viz import schedule as viz_schedule

    def labels() -> list[str]:
        box = viz_schedule.animate_schedule(schedules.recursive_doubling_all_reduce(4))
        play, slider = box.children[0].children
        return [play.description, play.tooltip, slider.description]

    assert labels() == ["play", "play the steps", "step"]
    set_language("zh_CN")
    assert labels() == ["播放", "逐步播放", "步"]


def test_doctors_report_in_chinese_keeps_its_labels_and_numbers():
    from labsupport.runtime.backend import doctor_report

    english = doctor_report()
    set_language("zh_CN")
    chinese = doctor_report()
    label = [line[:14] for line in english.splitlines()[1:11]]
    assert [line[:14] for line in chinese.splitlines()[1:11]] == label  # the left column
    assert "本机建议" in chinese and "因为：" in chinese
    assert "recommended here" in english and "because:" in english
