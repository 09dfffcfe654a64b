"""archsim.host"""
