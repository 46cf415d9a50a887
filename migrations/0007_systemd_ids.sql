-- Apps known by the systemd unit they were launched in
-- (`app-gnome-org.x.App-123.scope`) now have ids of their own,
-- `systemd:org.x.App`, so that a process that starts itself in such a unit
-- never inherits the grants of the Flatpak app `org.x.App`. Until now both
-- were the one string `org.x.App`; the `apps` table says how the app that
-- first asked under it was identified, and the user's decisions for an id
-- first seen from a systemd unit move to the new form (the user answered
-- that app's prompt). Decisions for ids first seen as Flatpak stay with the
-- Flatpak. The audit keeps the ids it was written with.
UPDATE decisions SET app_id = 'systemd:' || app_id
    WHERE app_id IN (SELECT app_id FROM apps WHERE identity_source = 'systemd')
      AND instr(app_id, ':') = 0;
UPDATE refused_publishers SET app_id = 'systemd:' || app_id
    WHERE app_id IN (SELECT app_id FROM apps WHERE identity_source = 'systemd')
      AND instr(app_id, ':') = 0;
UPDATE apps SET app_id = 'systemd:' || app_id
    WHERE identity_source = 'systemd' AND instr(app_id, ':') = 0;
