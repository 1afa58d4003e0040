from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # `import tests.fake_openai` however pytest was started
    sys.path.insert(0, str(_ROOT))
