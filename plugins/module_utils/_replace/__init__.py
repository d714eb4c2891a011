# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
