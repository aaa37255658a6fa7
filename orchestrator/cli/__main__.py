"""``python -m orchestrator.cli``: the ``coopsim`` command."""

import sys

from orchestrator.cli.main import main

sys.exit(main())
