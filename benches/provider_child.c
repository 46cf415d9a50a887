/* One publisher of `make bench`'s provider benchmark (benches/provider.rs):
 * connects to the session bus, publishes six kinds through
 * org.contextd.Provider1, prints "ready", and keeps its connection (its
 * entries live as long as it does) until stdin closes.
 *
 *   provider_child ID
 *
 * Built by the bench with gcc and pkg-config gio-2.0; each copy runs under
 * its own hard link, so that the broker sees 1000 different apps. */
#include <gio/gio.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *id = argc > 1 ? argv[1] : "0";
    GError *err = NULL;
    GDBusConnection *c = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &err);
    if (c == NULL) {
        fprintf(stderr, "provider_child: %s\n", err->message);
        return 1;
    }
    char doc[256], task[256], sel[256], person[256], event[256], place[256];
    snprintf(doc, sizeof doc, "{\"name\":\"report-%s.odt\",\"url\":\"file:///home/me/report-%s.odt\",\"encodingFormat\":\"application/vnd.oasis.opendocument.text\"}", id, id);
    snprintf(task, sizeof task, "{\"name\":\"Task %s\",\"status\":\"ActiveActionStatus\",\"due\":\"2026-11-30T17:00:00Z\"}", id);
    snprintf(sel, sizeof sel, "{\"text\":\"selected text of app %s\"}", id);
    snprintf(person, sizeof person, "{\"name\":\"Person %s\",\"email\":\"p%s@example.org\",\"channel\":\"matrix\"}", id, id);
    snprintf(event, sizeof event, "{\"name\":\"Meeting %s\",\"startDate\":\"2026-11-24T09:00:00Z\",\"endDate\":\"2026-11-24T09:30:00Z\"}", id);
    snprintf(place, sizeof place, "{\"name\":\"Office\",\"geo\":{\"latitude\":48.85,\"longitude\":2.35},\"accuracy\":20}");
    const char *kinds[] = {"document", "task", "selection", "person", "event", "location"};
    const char *data[] = {doc, task, sel, person, event, place};
    for (int i = 0; i < 6; i++) {
        GVariant *r = g_dbus_connection_call_sync(
            c, "org.contextd.Broker1", "/org/contextd/Broker1", "org.contextd.Provider1",
            "Publish", g_variant_new("(ss)", kinds[i], data[i]), NULL,
            G_DBUS_CALL_FLAGS_NONE, -1, NULL, &err);
        if (r == NULL) {
            fprintf(stderr, "provider_child %s: Publish %s: %s\n", id, kinds[i], err->message);
            return 2;
        }
        g_variant_unref(r);
    }
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    g_object_unref(c);
    return 0;
}
