"""archsim.interconnect"""
