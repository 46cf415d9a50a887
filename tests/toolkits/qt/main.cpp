// Copyright © 2026 The contextd authors
// SPDX-License-Identifier: MIT OR Apache-2.0
//
// A Qt 5 client of the broker through the proxies qdbusxml2cpp generates
// from dbus-interfaces/ (context1.h, subscription1.h; tests/it/toolkits.rs
// generates and builds them). It prints the active window's app id, the
// number of grants (Consent1.ListGrants),
// subscribes to `windows`, prints every Changed signal and exits after the
// first focus change.

#include <QCoreApplication>
#include <QDBusArgument>
#include <QDBusMetaType>
#include <QDBusConnection>
#include <QDBusObjectPath>
#include <QDBusPendingReply>
#include <QStringList>
#include <QVariantMap>

#include <cstdio>

#include "consent1.h"
#include "context1.h"
#include "subscription1.h"

// A nested a{sv} arrives as a QDBusArgument inside the QVariant.
static QVariantMap toMap(const QVariant &v)
{
    if (v.canConvert<QDBusArgument>())
        return qdbus_cast<QVariantMap>(v.value<QDBusArgument>());
    return v.toMap();
}

static int fail(const QDBusError &e)
{
    std::fprintf(stderr, "%s: %s\n", qPrintable(e.name()), qPrintable(e.message()));
    return 1;
}

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    QDBusConnection bus = QDBusConnection::sessionBus();
    if (!bus.isConnected()) {
        std::fprintf(stderr, "no session bus\n");
        return 1;
    }
    const QString name = QStringLiteral("org.contextd.Broker1");
    org::contextd::Context1 ctx(name, QStringLiteral("/org/contextd/Broker1"), bus);

    QDBusPendingReply<QVariantMap> window = ctx.GetActiveWindow();
    window.waitForFinished();
    if (window.isError())
        return fail(window.error());
    std::printf("app_id=%s\n", qPrintable(window.value().value(QStringLiteral("app_id")).toString()));
    std::printf("version=%u\n", ctx.version());

    // aa{sv} is QList<QVariantMap> (the XML's Qt annotation); QtDBus
    // demarshals it once the type is registered.
    qDBusRegisterMetaType<QList<QVariantMap>>();
    org::contextd::Consent1 consent(name, QStringLiteral("/org/contextd/Broker1"), bus);
    QDBusPendingReply<QList<QVariantMap>> grants = consent.ListGrants();
    grants.waitForFinished();
    if (grants.isError())
        return fail(grants.error());
    const QList<QVariantMap> g = grants.value();
    std::printf("grants=%d first=%s\n", int(g.size()),
                g.isEmpty() ? "" : qPrintable(g.first().value(QStringLiteral("category")).toString()));

    QDBusPendingReply<QDBusObjectPath> path = ctx.Subscribe(QStringList{QStringLiteral("windows")});
    path.waitForFinished();
    if (path.isError())
        return fail(path.error());
    org::contextd::Subscription1 sub(name, path.value().path(), bus);
    QObject::connect(&sub, &org::contextd::Subscription1::Changed,
                     [&app](const QString &category, const QVariantMap &data) {
                         const QString event = data.value(QStringLiteral("event")).toString();
                         const QVariantMap w = toMap(data.value(QStringLiteral("window")));
                         std::printf("changed category=%s event=%s window=%s app_id=%s\n",
                                     qPrintable(category), qPrintable(event),
                                     qPrintable(w.value(QStringLiteral("id")).toString()),
                                     qPrintable(w.value(QStringLiteral("app_id")).toString()));
                         std::fflush(stdout);
                         if (event == QStringLiteral("focus"))
                             app.quit();
                     });
    std::printf("subscribed path=%s\n", qPrintable(path.value().path()));
    std::fflush(stdout);
    return app.exec();
}
