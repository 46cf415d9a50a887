#!/usr/bin/env bash
# Publish a document to contextd from a shell with gdbus, then retract it:
# org.contextd.Provider1.Publish(kind, data) and Retract(kind).
#
#   examples/provider-gdbus.sh [NAME [URL]]     (default: notes.txt in $HOME)
#
# The broker keeps an entry only while the bus connection that published it
# is open, and a `gdbus call` closes its connection as soon as it has the
# answer: the document below is published, handed to every allowed
# subscriber (`provided.document`), and gone again a moment later, when
# gdbus exits. That is enough to try the interface and watch it from a
# reader (`contextctl watch provided.document`); an app that wants its entry
# to stay keeps its connection open, as examples/provider.py and
# examples/c-provider do.
#
# The entry belongs to the app the broker identifies from the connection's
# credentials: here `exe:/usr/bin/gdbus`. A refused app gets
# org.contextd.Error.NotAllowed, data that breaks the kind's rules
# org.contextd.Error.InvalidArgs; gdbus prints the error and exits 1.
#
# gdbus reads an argument as GVariant text first, which would turn JSON's
# backslash escapes into the characters they stand for: keep the JSON free
# of backslashes (this script refuses a NAME or URL with a backslash or a
# double quote).
set -euo pipefail

name=${1:-notes.txt}
default_url="file://$HOME/$name"
url=${2:-${default_url// /%20}}
case "$name$url" in
    *\\* | *\"*)
        echo "provider-gdbus.sh: a NAME or URL with \\ or \" needs JSON escapes; use examples/provider.py" >&2
        exit 2
        ;;
esac

# Publish (what the Provider1 XML documents):
gdbus call --session --dest org.contextd.Broker1 \
    --object-path /org/contextd/Broker1 \
    --method org.contextd.Provider1.Publish document \
    "{\"name\": \"$name\", \"url\": \"$url\", \"encodingFormat\": \"text/plain\"}"
echo "published document: $name ($url)"

# Retract (a kind the app has not published, or no longer has, is no error):
gdbus call --session --dest org.contextd.Broker1 \
    --object-path /org/contextd/Broker1 \
    --method org.contextd.Provider1.Retract document
echo "retracted document"
