from kafkalite.cli import main

main()
