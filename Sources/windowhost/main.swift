print("windowhost")
