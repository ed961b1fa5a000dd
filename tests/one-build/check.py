"""The tests link the library and binary `cargo build --release` made (`make test` runs it).

Reads `cargo test --release --no-run --message-format json` on standard input and fails when
it compiled dplab's library or binary again outside their test harnesses: a dev-dependency
turned on a feature of a crate in dplab's tree (tempfile did, rustix's `fs`: Cargo.toml says
how it was mended), and every `cargo test` paid a second build of the whole crate.
"""

import json
import sys


def main() -> int:
    rebuilt = []
    for line in sys.stdin:
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact" or m["profile"]["test"]:
            continue
        target = m["target"]
        if target["name"] == "dplab" and set(target["kind"]) & {"lib", "bin"} and not m["fresh"]:
            rebuilt.append(f"{'/'.join(target['kind'])} {m['filenames'][0]}")
    if rebuilt:
        print(
            "cargo test compiled dplab again, outside its test harnesses, after cargo build "
            "had built it: the two builds differ in a dependency's features (compare "
            "`cargo build --message-format json` with `cargo test --no-run --message-format "
            "json`, field `features`) and ask for the difference in Cargo.toml's "
            "[dependencies]:\n  " + "\n  ".join(rebuilt),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
