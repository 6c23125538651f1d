import subprocess
import sys
import time

from app.startup import process_age_s


def test_process_age_counts_from_the_process_start_not_from_the_import() -> None:
    """A child that sleeps before importing the module still reports the sleep."""
    code = "import time; time.sleep(0.6); from app.startup import process_age_s; print(process_age_s())"
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 0.6 <= age < 30
    before = process_age_s()
    time.sleep(0.05)
    assert process_age_s() >= before


def test_bench_startup_takes_the_command_to_start_and_alternates_commands(tmp_path) -> None:
    """``compare_startup`` starts each labelled command in turn (the first start of each apart),
    with the data folder and the environment it is given; a bundle's executable is one of them."""
    from app.bench_startup import compare_startup, format_report

    log = tmp_path / "starts.txt"
    fake = tmp_path / "fake_app.py"
    fake.write_text(
        "import os, sys\n"
        f"open({str(log)!r}, 'a').write(sys.argv[1] + ' ' + os.environ.get('WHO', '-') + ' '"
        " + os.environ['QT_QPA_PLATFORM'] + ' ' + str(sys.argv[2:5]) + '\\n')\n"
        "print('self-test: window in 0.25 s, ready in %s s (models loaded in 1 s)' % sys.argv[1])\n",
        encoding="utf-8")
    reports = compare_startup(2, {
        "venv": ([sys.executable, str(fake), "1.5"], None),
        "bundle": ([sys.executable, str(fake), "2.5"], {"WHO": "clean", "PATH": "/usr/bin:/bin"}),
    })
    starts = log.read_text(encoding="utf-8").splitlines()
    assert [line.split()[:3] for line in starts] == [["1.5", "-", "offscreen"], ["2.5", "clean", "offscreen"]] * 3
    assert "'--data-dir'" in starts[0] and "'--self-test'" in starts[0]
    assert reports["venv"]["ready_s"]["median"] == 1.5 and reports["bundle"]["ready_s"]["median"] == 2.5
    assert reports["bundle"]["window_s"]["median"] == 0.25 and reports["bundle"]["runs"] == 2
    assert "startup of bundle over 2 runs" in format_report(reports)
