from kb.cli.launch import main

main()
