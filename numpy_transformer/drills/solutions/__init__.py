"""Reference solutions of the drills (printed by `drill solution NAME`; each one passes
`drill check`)."""
