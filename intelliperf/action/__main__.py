import sys

from intelliperf.action import main

sys.exit(main())
