from ghs.cli import main

main()
