"""``python -m orchestrator.vehicle_test dlc --vehicle g35_sedan --speed 20 --out out/``"""

from . import main

raise SystemExit(main())
