"""python3 -m ais_bench ... (ge.core.acl.ais_bench.cli)."""
import sys

from ge.core.acl.ais_bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
