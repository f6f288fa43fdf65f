"""``python -m rtlab.store``: rtlab's influxd in the foreground (rtlab.store.local.main),
what env/systemd/rtlab-influxd.service runs."""
from .local import main

raise SystemExit(main())
