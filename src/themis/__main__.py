"""``python -m themis``: the ``themis`` command, for environments without the script on
PATH (a venv not activated, ``pipx run``, a notebook's ``!python -m themis``)."""

from themis.cli.main import main

if __name__ == "__main__":
    main()
