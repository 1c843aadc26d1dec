from htam_graph.cli import main

main()
