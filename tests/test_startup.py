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
