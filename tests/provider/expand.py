"""Expand entries of the shared vocabulary with a real JSON-LD processor.

    expand.py CONTEXT_FILE < ENTRIES

ENTRIES is a JSON object {label: entry} (entries as the broker serves them,
with their @type); CONTEXT_FILE is dbus-interfaces/contextd.jsonld. Prints
{label: expanded} (pyld's expanded form: every key an IRI) on stdout. Any
remote document is refused: the vocabulary must expand on its own.

Run by tests/it/vocabulary_jsonld.rs with the venv python (PyPI pyld,
installed by scripts/deps.sh --python), which makes the assertions.
"""

import json
import sys

from pyld import jsonld


def no_remote_documents(url, options=None):
    raise jsonld.JsonLdError(
        f"refusing to load a remote document: {url}",
        "jsonld.LoadDocumentError",
        code="loading document failed",
    )


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        context = json.load(f)
    entries = json.load(sys.stdin)
    out = {}
    for label, entry in entries.items():
        out[label] = jsonld.expand(
            entry,
            {"expandContext": context, "documentLoader": no_remote_documents},
        )
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
