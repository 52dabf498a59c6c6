from intelliperf.cli import main

main()
