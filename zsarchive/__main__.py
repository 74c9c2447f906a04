from zsarchive.cli import main

main()
