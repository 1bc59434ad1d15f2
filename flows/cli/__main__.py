"""``python -m geosweep.flows.cli``: the ``geosweep`` command."""

import sys

from geosweep.flows.cli import main

sys.exit(main())
