import sys

from flagproxy.cli import main

sys.exit(main())
