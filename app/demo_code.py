"""Print the current second-factor code of a demo account (SPEC OPS-2).

``python -m app.demo_code reviewer@example.com`` computes it from the account's
published demo seed (`app.demo.demo_totp_seed`), without the database: a stand-in
for an authenticator app while trying the demo. Useless for a real account, whose
seed is random.
"""

from __future__ import annotations

import sys

import pyotp

from app.demo import demo_totp_seed


def main(argv: list[str]) -> int:
    if len(argv) != 1 or "@" not in argv[0]:
        print("usage: python -m app.demo_code <demo account email>", file=sys.stderr)
        return 2
    print(pyotp.TOTP(demo_totp_seed(argv[0])).now())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
