/* A C provider for contextd: publishes the document this "app" has open
 * through org.contextd.Provider1, with the proxy gdbus-codegen generates
 * from dbus-interfaces/org.contextd.Provider1.xml, then runs a GMainLoop
 * until SIGTERM or SIGINT, retracts its entry and exits.
 *
 *   ./provider NAME [URL [ENCODING_FORMAT]]
 *
 * The broker keeps the entry only while this process's bus connection is
 * open, and files it under the app it identifies from the connection's
 * credentials (here exe:/path/to/provider), never under a name the app
 * claims. Exit status: 0 after a clean quit, 1 when the broker refused the
 * call (the D-Bus error's name and message are printed), 2 for bad
 * arguments or no session bus.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#include <stdio.h>
#include <stdlib.h>
#include <glib.h>
#include <glib-unix.h>
#include <gio/gio.h>

#include "provider1-generated.h"

#define BUS_NAME "org.contextd.Broker1"
#define OBJECT_PATH "/org/contextd/Broker1"

/* Append @s to @out as a JSON string (quotes and escapes included). */
static void
append_json_string (GString *out, const char *s)
{
  g_string_append_c (out, '"');
  for (const unsigned char *p = (const unsigned char *) s; *p != '\0'; p++)
    {
      switch (*p)
        {
        case '"':
          g_string_append (out, "\\\"");
          break;
        case '\\':
          g_string_append (out, "\\\\");
          break;
        case '\n':
          g_string_append (out, "\\n");
          break;
        case '\t':
          g_string_append (out, "\\t");
          break;
        default:
          if (*p < 0x20)
            g_string_append_printf (out, "\\u%04x", *p);
          else
            g_string_append_c (out, (char) *p); /* UTF-8 passes as it is */
        }
    }
  g_string_append_c (out, '"');
}

/* The document entry: {"name": ..., "url": ..., "encodingFormat": ...,
 * "dateModified": now}. */
static char *
document_json (const char *name, const char *url, const char *format)
{
  GString *json = g_string_new ("{\"name\": ");
  append_json_string (json, name);
  if (url != NULL)
    {
      g_string_append (json, ", \"url\": ");
      append_json_string (json, url);
    }
  if (format != NULL)
    {
      g_string_append (json, ", \"encodingFormat\": ");
      append_json_string (json, format);
    }
  GDateTime *now = g_date_time_new_now_utc ();
  char *date = g_date_time_format (now, "%Y-%m-%dT%H:%M:%SZ");
  g_string_append_printf (json, ", \"dateModified\": \"%s\"}", date);
  g_free (date);
  g_date_time_unref (now);
  return g_string_free (json, FALSE);
}

/* Print a failed call's D-Bus error name and message. */
static void
print_error (const char *method, GError *error)
{
  char *name = g_dbus_error_get_remote_error (error);
  if (name != NULL)
    g_dbus_error_strip_remote_error (error);
  fprintf (stderr, "%s failed: %s: %s\n", method,
           name != NULL ? name : g_quark_to_string (error->domain),
           error->message);
  g_free (name);
}

typedef struct
{
  GMainLoop *loop;
  ContextdProvider1 *proxy;
} App;

static gboolean
on_quit_signal (gpointer data)
{
  App *app = data;
  GError *error = NULL;

  /* Not needed (the entry goes with the connection), but polite. */
  if (contextd_provider1_call_retract_sync (app->proxy, "document", NULL,
                                            &error))
    printf ("retracted document\n");
  else
    {
      print_error ("Retract", error);
      g_clear_error (&error);
    }
  g_main_loop_quit (app->loop);
  return G_SOURCE_REMOVE;
}

int
main (int argc, char **argv)
{
  GError *error = NULL;
  App app = { 0 };

  if (argc < 2 || argc > 4)
    {
      fprintf (stderr, "usage: %s NAME [URL [ENCODING_FORMAT]]\n", argv[0]);
      return 2;
    }
  /* Line by line, so that whoever reads our output sees each step. */
  setvbuf (stdout, NULL, _IOLBF, 0);

  app.proxy = contextd_provider1_proxy_new_for_bus_sync (
      G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES, BUS_NAME,
      OBJECT_PATH, NULL, &error);
  if (app.proxy == NULL)
    {
      fprintf (stderr, "cannot reach the session bus: %s\n", error->message);
      g_error_free (error);
      return 2;
    }

  char *json = document_json (argv[1], argc > 2 ? argv[2] : NULL,
                              argc > 3 ? argv[3] : NULL);
  if (!contextd_provider1_call_publish_sync (app.proxy, "document", json, NULL,
                                             &error))
    {
      print_error ("Publish", error);
      g_error_free (error);
      g_free (json);
      g_object_unref (app.proxy);
      return 1;
    }
  printf ("published document: %s\n", json);
  g_free (json);

  app.loop = g_main_loop_new (NULL, FALSE);
  g_unix_signal_add (SIGTERM, on_quit_signal, &app);
  g_unix_signal_add (SIGINT, on_quit_signal, &app);
  g_main_loop_run (app.loop);

  g_main_loop_unref (app.loop);
  g_object_unref (app.proxy);
  return EXIT_SUCCESS;
}
