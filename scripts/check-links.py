#!/usr/bin/env python3
"""Check every relative link in the repository's Markdown files.

A link to a file must name a file or directory of the repository (never
one outside it: the docs travel with the code), and a link with an
anchor (`page.md#section`, `#section`) must name a heading of that page,
as GitHub spells its anchors. Links with a scheme (https:, mailto:) are
not checked. Prints each broken link with its file and line and exits 1
if there is any; needs only Python 3.

    scripts/check-links.py            # the Markdown files git knows of
    scripts/check-links.py FILE...    # only these
"""

import os
import re
import subprocess
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# A link or image: [text](target) or [text](target "title"); the text may
# run over lines within a paragraph.
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\n\s*\n).)+?\1", re.S)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def blank(m):
    """The match replaced by spaces, newlines kept, so offsets and lines stay."""
    return re.sub(r"[^\n]", " ", m.group(0))


def prose(text):
    """The text with fenced code blocks blanked out."""
    out, fenced = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fenced is None and m:
            fenced = m.group(1)
            out.append("")
        elif fenced is not None:
            if line.strip().startswith(fenced):
                fenced = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor for a heading: its text lower-cased, punctuation
    dropped (letters, digits, `_`, `-` and spaces stay), spaces as `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        with open(path, encoding="utf-8") as f:
            text = prose(f.read())
        seen, found = {}, set()
        for line in text.split("\n"):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        # Explicit anchors: <a id="..."> / <a name="...">
        found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
        anchor_cache[path] = found
    return anchor_cache[path]


def check(path):
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        text = CODE_SPAN.sub(blank, prose(f.read()))
    errors = 0
    for m in LINK.finditer(text):
        target = m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if not target or SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        if file_part.startswith("/"):
            print(f"{rel}:{line}: {target}: an absolute path; link relative to the page")
            errors += 1
            continue
        dest = os.path.realpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if dest != ROOT and not dest.startswith(ROOT + os.sep):
            print(f"{rel}:{line}: {target}: outside the repository")
            errors += 1
            continue
        if not os.path.exists(dest):
            print(f"{rel}:{line}: {target}: no such file")
            errors += 1
            continue
        if anchor:
            if not dest.endswith(".md") or os.path.isdir(dest):
                print(f"{rel}:{line}: {target}: an anchor into a file that is not Markdown")
                errors += 1
            elif anchor not in anchors(dest):
                print(f"{rel}:{line}: {target}: no heading with that anchor in {os.path.relpath(dest, ROOT)}")
                errors += 1
    return errors


def main():
    if len(sys.argv) > 1:
        files = [os.path.realpath(p) for p in sys.argv[1:]]
    else:
        try:
            out = subprocess.run(
                ["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
                check=True, capture_output=True, text=True,
            ).stdout
            files = [os.path.join(ROOT, p) for p in out.split("\n") if p]
        except (OSError, subprocess.CalledProcessError):
            # Not a git checkout (a release tarball): the top and docs/.
            files = [
                os.path.join(d, n)
                for d in (ROOT, os.path.join(ROOT, "docs"))
                if os.path.isdir(d)
                for n in sorted(os.listdir(d))
                if n.endswith(".md")
            ]
    errors = sum(check(p) for p in files if os.path.exists(p))
    if errors:
        print(f"check-links: {errors} broken link(s) in {len(files)} file(s)")
        return 1
    print(f"check-links: {len(files)} file(s), every relative link and anchor found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
