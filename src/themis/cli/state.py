"""``themis state backup``: a consistent copy of the arbiter's state database, taken while
it runs (SQLite's online backup API), for the operator's backups and restores
(docs/runtime.md, "Backup and restore")."""

from __future__ import annotations

import click

from themis.cli.runtime import STATE_DIR


@click.group(short_help="Back up the arbiter's state database.")
def state() -> None:
    """Operations on the arbiter's state directory."""


@state.command()
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=STATE_DIR,
    envvar="THEMIS_STATE_DIR",
    show_default=True,
    help="The arbiter's state directory (env THEMIS_STATE_DIR).",
)
@click.argument("dest", type=click.Path(dir_okay=False))
def backup(state_dir: str, dest: str) -> None:
    """Copy the state database to DEST (a new file, 0600) while the arbiter runs, and
    check the copy. Restore: stop serve, move the copy to STATE_DIR/themis.db (remove
    themis.db-wal and themis.db-shm), start serve without --init."""
    from themis.cli.inert import inert
    from themis.runtime.state.store import backup as backup_db

    click.echo(inert(backup_db(state_dir, dest)))
