from dexcli.cli.main import main

main()
