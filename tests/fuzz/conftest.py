# The suite imports in importlib mode; the fuzzer's helper modules live beside its tests.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
