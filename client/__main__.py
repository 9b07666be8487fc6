"""``python -m client``: the ``kpca`` command line (`client.cli`)."""

from client.cli import main

if __name__ == "__main__":
    main()
