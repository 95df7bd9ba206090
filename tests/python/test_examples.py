"""The examples under examples/python run as tests, and print what they promise."""

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def run(name: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_quickstart_prints_its_results() -> None:
    # loss = sum_m sum_k w[0,k] x[m,k] = (0.5*1 - 1*3) + (0.5*2 - 1*4) = -5.5
    assert run("quickstart.py").splitlines() == [
        "layout (4,(2,3)):(1,(4,8)) size 24 cosize 24",
        "index of (3, (1, 2)): 23",
        "divide by 4:2 -> ((2,2),(2,3)):((4,1),(2,8))",
        "matrix [[1.0, 3.0, 5.0], [2.0, 4.0, -1.0]] version 1",
        "loss [-5.5] d loss / d w [[3.0, 7.0]]",
        "on disk [[1.0, 3.0, 5.0], [2.0, 4.0, -1.0]] source released True",
    ]


def test_custom_carrier_prints_its_results() -> None:
    assert run("custom_carrier.py").splitlines() == [
        "values [[0.0, 0.0], [2.5, 0.0]] version 1",
        "the device holds [[0.0, 2.5, 0.0, 0.0]]",
        "t.carrier is carrier: True",
        "new_like made a ListCarrier on the same device: True",
        "the device holds [[0.0, 2.5, 0.0, 0.0], [1.0, 2.0]]",
        "the write failed with OSError('the device is gone') and the version stayed 0",
    ]


def test_legacy_carrier_prints_its_results() -> None:
    assert run("legacy_carrier.py").splitlines() == [
        "values [3.0, -2.0, 4.0] version 1 list [3.0, -2.0, 4.0]",
        "neg [-3.0, 2.0, -4.0] on a ListCarrier",
        "dispatched Negate neg True",
        "relu refused: ListCarrier declares no operation-plan capability for 'relu'",
        "moved to the CPU [1.5, -1.0, 2.0] source released True",
    ]


def test_numpy_roundtrip_prints_its_results() -> None:
    assert run("numpy_roundtrip.py").splitlines() == [
        "shared True shape (2, 3) layout (2,3):(3,1)",
        "y [[0.0, 3.0, 6.0], [9.0, 12.0, 15.0]] read-only True",
        "write refused: its slots are exported to 1 live view(s) (such as a numpy array); "
        "writes are refused until every view is dropped",
        "after the view is gone -1.0 version 1",
        "tiled layout copied: (4, 3)",
    ]


def test_python_kernels_prints_its_results() -> None:
    assert run("python_kernels.py").splitlines() == [
        "capabilities ['neg', 'relu']",
        "neg [2.0, 1.0, -1.0, -2.0]",
        "relu of 4 [0.0, 0.0, 1.0, 2.0]",
        "relu of 2 [0.0, 0.0]",
        "ran ['neg', 'vectorized relu', 'vectorized relu declined', 'relu']",
        "on the cpu [-2.0, -1.0, 1.0, 2.0]",
    ]


def test_custom_operation_prints_its_results() -> None:
    # softsign(x) = x / (1 + |x|); its derivative 1 / (1 + |x|)^2 at -3, -0.5, 0, 1.
    assert run("custom_operation.py").splitlines() == [
        "softsign [-0.75, -0.3333, 0.0, 0.5] grad_fn demo.softsign",
        "gradient [0.0625, 0.4444, 1.0, 0.25]",
        "matches finite differences: True",
        "the kernel matches the reference: True",
        "on a CPU tensor: UnsupportedOperationPlan demo.softsign",
    ]
