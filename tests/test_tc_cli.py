"""``tensorc run / explain / check``: outputs, exit codes and diagnostics on stderr."""

from __future__ import annotations

import numpy as np
import pytest

from tensorc.cli import main

BAD = "size N = 3\ninput x : f64[N]\noutput y : f64[N]\ny[i] = x[i, j]\n"


def test_check_ok(capsys):
    assert main(["check", "examples/matmul.tc"]) == 0
    assert "examples/matmul.tc: ok (2 input(s), 4 output(s))" in capsys.readouterr().out


def test_check_reports_diagnostics_on_stderr_with_exit_1(tmp_path, capsys):
    path = tmp_path / "bad.tc"
    path.write_text(BAD)
    assert main(["check", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error[E-rank]: 'x' has rank 1 but is indexed with 2")
    assert f"--> {path}:4:8" in captured.err


def test_run_with_inputs_and_output_file(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a, b = rng.random((6, 4)), rng.random((4, 5))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "out.npz"
    code = main(["run", "examples/matmul.tc", "--input", f"A={tmp_path / 'a.npy'}",
                 "--input", f"B={tmp_path / 'b.npy'}", "--output", str(out)])
    assert code == 0
    assert "C1 : float64[6, 5]" in capsys.readouterr().out
    saved = np.load(out)
    for name in ("C1", "C2", "C3", "C4"):
        np.testing.assert_allclose(saved[name], a @ b)


def test_run_streams_zarr_inputs_and_outputs(tmp_path, capsys):
    import zarr

    rng = np.random.default_rng(1)
    a, b = rng.random((6, 4)), rng.random((4, 5))
    store = zarr.create_array(str(tmp_path / "a.zarr"), shape=a.shape, chunks=(2, 4),
                              dtype="f8")
    store[:] = a
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "out.zarr"
    code = main(["run", "examples/matmul.tc", "--input", f"A={tmp_path / 'a.zarr'}",
                 "--input", f"B={tmp_path / 'b.npy'}", "--output", str(out)])
    assert code == 0
    assert f"C1 : written to {out}/C1" in capsys.readouterr().out
    group = zarr.open_group(str(out), mode="r")
    for name in ("C1", "C2", "C3", "C4"):
        np.testing.assert_allclose(group[name][:], a @ b)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr", "b.npy", "out.zarr"]


def test_run_random_and_set_param(capsys):
    assert main(["run", "examples/logreg.tc", "--random", "--set", "steps=2"]) == 0
    assert "w : float64[4]" in capsys.readouterr().out


def test_run_missing_input_is_a_user_error(capsys):
    assert main(["run", "examples/contraction.tc"]) == 1
    assert "error[E-input]: missing input 'X'" in capsys.readouterr().err


def test_run_refuses_pickled_inputs(tmp_path, capsys):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert main(["run", "examples/contraction.tc", "--input", f"X={path}"]) == 1
    assert "cannot load --input X=" in capsys.readouterr().err


@pytest.mark.parametrize("stage", ["ast", "ir", "plan", "tasks", "schedule", "dot"])
def test_explain_every_stage(stage, capsys):
    assert main(["explain", "examples/shortest_path.tc", "--emit", stage]) == 0
    out = capsys.readouterr().out
    assert out.strip()
    if stage == "dot":
        assert out.startswith("digraph tensorc {") and out.rstrip().endswith("}")
    if stage == "schedule":
        assert out.startswith("local executor: tasks run in graph order")


def test_missing_file_is_a_user_error(capsys):
    assert main(["check", "nowhere.tc"]) == 1
    assert "cannot read nowhere.tc" in capsys.readouterr().err


def test_internal_errors_exit_2(monkeypatch, capsys):
    import tensorc.program

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(tensorc.program, "check", broken)
    assert main(["check", "examples/matmul.tc"]) == 2
    assert "internal error: RuntimeError: boom" in capsys.readouterr().err
