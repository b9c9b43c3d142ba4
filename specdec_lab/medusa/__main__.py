"""`python -m specdec_lab.medusa calibrate [options]`: measure the heads' accuracies (calibration.py).

(Training is `python -m specdec_lab.train medusa`; decoding is `generate(..., method="medusa")`.)
"""

import sys

from .calibration import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "calibrate":
        print("usage: python -m specdec_lab.medusa calibrate [--help]", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(args[1:]))
